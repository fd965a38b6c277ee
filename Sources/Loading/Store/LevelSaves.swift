extension StoreMachine {
    /// A key's level saves: how many were issued and have not landed, and the newest confirmed versions a level failed
    /// to save and saved (a removal or a clear counts as saved). While a save is in flight, or a failure is newer than
    /// every success, a level may not hold the confirmed value: the store keeps the key's entry, and a level read of
    /// the key is behind it.
    struct LevelSaves: Sendable {
        private var inFlight = 0
        private var failedVersion = 0
        private var savedVersion = 0

        /// Whether no save is in flight and no level failed to save a value newer than one saved since.
        var isSettled: Bool { inFlight == 0 && !isBehind }

        /// Whether a level failed to save a value newer than any saved since.
        var isBehind: Bool { failedVersion > savedVersion }

        /// `count` level saves (or removals) were issued.
        mutating func issue(_ count: Int) {
            inFlight += count
        }

        /// A save of confirmed version `version` landed; `current`: issued under the entry's generation (one from
        /// before a removal or a clear only counts as landed).
        mutating func land(version: Int, failed: Bool, current: Bool) {
            precondition(inFlight > 0, "A level save lands that was not issued")
            inFlight -= 1
            guard current else { return }
            if failed {
                failedVersion = max(failedVersion, version)
            } else {
                savedVersion = max(savedVersion, version)
            }
        }

        /// The levels are emptied with the confirmed value at `confirmedVersion` (a clear): nothing is behind.
        mutating func cleared(at confirmedVersion: Int) {
            (failedVersion, savedVersion) = (0, confirmedVersion)
        }
    }
}
