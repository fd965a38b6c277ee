extension StoreMachine {
    /// A key's level saves: how many were issued and have not landed (by the confirmed version they save), the newest
    /// confirmed versions a level failed to save and saved (a removal or a clear counts as saved), and the flushes
    /// waiting for the saves in flight when they came. While a save is in flight, or a failure is newer than every
    /// success, a level may not hold the confirmed value: the store keeps the key's entry, and a level read of the key
    /// is behind it.
    struct LevelSaves: Sendable {
        /// The oldest confirmed version with saves in flight, and how many; the others in `newer` (usually none: a
        /// change's saves are issued together, so no dictionary is made for a key at rest).
        private var oldest: (version: Int, count: Int)?
        private var newer: [Int: Int] = [:]
        private var failedVersion = 0
        private var savedVersion = 0
        /// Flushes waiting, each until no save of a version up to `upTo` is in flight.
        private var flushes: [(ticket: SaveTicket, upTo: Int)] = []

        /// Whether no save is in flight and no level failed to save a value newer than one saved since.
        var isSettled: Bool { oldest == nil && !isBehind }

        /// Whether saves were issued that have not landed.
        var hasInFlight: Bool { oldest != nil }

        /// Whether a level failed to save a value newer than any saved since.
        var isBehind: Bool { failedVersion > savedVersion }

        /// `count` level saves (or removals) of confirmed version `version` were issued.
        mutating func issue(_ count: Int, version: Int) {
            guard count > 0 else { return }
            guard let current = oldest else {
                oldest = (version, count)
                return
            }
            if version == current.version {
                oldest = (version, current.count + count)
            } else if version < current.version {  // a debounced write of an older value, flushed now
                newer[current.version, default: 0] += current.count
                oldest = (version, count)
            } else {
                newer[version, default: 0] += count
            }
        }

        /// A save of confirmed version `version` landed; `current`: issued under the entry's generation (one from
        /// before a removal or a clear only counts as landed). Returns the flushes it was the last to wait for, to
        /// release after unlocking.
        mutating func land(version: Int, failed: Bool, current: Bool) -> [SaveTicket] {
            if let first = oldest, first.version == version {
                if first.count > 1 {
                    oldest = (version, first.count - 1)
                } else if let next = newer.keys.min() {
                    oldest = (next, newer.removeValue(forKey: next) ?? 0)
                } else {
                    oldest = nil
                }
            } else {
                guard let count = newer[version], count > 0 else {
                    preconditionFailure("A level save lands that was not issued")
                }
                newer[version] = count == 1 ? nil : count - 1
            }
            if current {
                if failed {
                    failedVersion = max(failedVersion, version)
                } else {
                    savedVersion = max(savedVersion, version)
                }
            }
            guard !flushes.isEmpty else { return [] }
            let oldestInFlight = oldest?.version ?? .max
            var done: [SaveTicket] = []
            flushes.removeAll { flush in
                guard flush.upTo < oldestInFlight else { return false }
                done.append(flush.ticket)
                return true
            }
            return done
        }

        /// Makes a flush's `ticket` wait for the saves in flight now (not for those issued later); `false` when none
        /// is in flight (the caller releases it).
        mutating func whenLanded(_ ticket: SaveTicket) -> Bool {
            guard let first = oldest else { return false }
            flushes.append((ticket, max(first.version, newer.keys.max() ?? first.version)))
            return true
        }

        /// The levels are emptied with the confirmed value at `confirmedVersion` (a clear): nothing is behind.
        mutating func cleared(at confirmedVersion: Int) {
            (failedVersion, savedVersion) = (0, confirmedVersion)
        }
    }
}
