#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// Starts a read of level `level` for `key`, unless the store knows better: a change of the key is running (the
    /// answer is what it shows) or a clear is emptying the levels (a miss). A level whose writes for the key are
    /// not issued yet (a debounced write, operations waiting) may be read, but its hit is older than what the store
    /// confirmed: `inStep` is false, and the store takes it as a miss. A level in step is read like any other (a
    /// value too old for the store may be young enough there, written by another process).
    mutating func beginLevelRead(_ key: Key, level: Int) -> LevelRead {
        guard !issuing.isClearing else { return .known(nil) }
        let entry = ensureEntry(key)
        guard !(entry.confirmed.isKnown && !entry.work.turn.isFree) else {
            defer { release(key) }
            return .known(entry.confirmed.value == nil ? nil : shownNow(key))
        }
        // Levels that could not save what the store confirmed (or remove it) are behind too, until a save lands.
        let behind =
            entry.work.writes.isBehind(at: level) || entry.work.saves.isBehind
        entry.levelReads += 1
        let stamp = ReadStamp(
            generation: entry.generation, confirmedVersion: entry.confirmed.version, staleMark: entry.staleness.mark)
        return .read(stamp, inStep: !behind)
    }

    /// Whether a change of `key` runs or waits (a read asked now comes after it).
    func isChanging(_ key: Key) -> Bool {
        peek(key).map { !$0.work.turn.isFree } ?? false
    }

    /// Queues a read of `key` behind the changes of the key that run or wait (asked before it), when there are some:
    /// `reply` is called when its turn comes, and the read goes on then, seeing what they made; it holds the key, as a
    /// level read does, until it ends that with ``endLevelRead(_:since:)`` once its next step holds the key in turn.
    /// `false` when the key's turn is free (the read goes on at once).
    mutating func awaitTurn(of key: Key, then reply: @escaping @Sendable () -> Void) -> Bool {
        guard let entry = entry(key), !entry.work.turn.isFree else { return false }
        enqueue(.barrier(reply: reply), on: entry)
        return true
    }

    /// Holds `key` in the store as a level read does, until ``endLevelRead(_:since:)``: a read that answered with a
    /// hit keeps the value it served shown until its fetch has begun.
    mutating func holdKey(_ key: Key) {
        ensureEntry(key).levelReads += 1
    }

    /// Ends a level read that brought nothing to confirm (a miss, a failure, a value too old, a cancel). Returns
    /// what the key shows when the store learned something since the read began (a fetch or a write confirmed a
    /// value, or a removal or a clear overtook it): that is the read's answer, rather than reading on or fetching.
    /// A change that confirmed no value (another change's read of the levels, which found nothing) teaches nothing.
    mutating func endLevelRead(_ key: Key, since stamp: ReadStamp? = nil) -> Snapshot? {
        guard let entry = entry(key) else { return nil }
        entry.levelReads -= 1
        defer { release(key) }
        guard let stamp,
            entry.generation != stamp.generation
                || (entry.confirmed.version != stamp.confirmedVersion && entry.confirmed.value != nil)
        else { return nil }
        return shownNow(key)
    }

    /// Ends a read of the last level that brought nothing to confirm, and begins the read's fetch (see
    /// ``beginFetch(_:joining:since:completion:)``; `since` is the stamp of the read's first level read): the key
    /// stays in use from one to the other, so its entry is neither dropped nor made again. When the store learned
    /// something since this level read began, the read ends as ``endLevelRead(_:since:)`` ends it, and no fetch
    /// begins: what it learned is returned.
    mutating func endLastLevelReadThenFetch(
        _ key: Key, readAt stamp: ReadStamp, since: ReadStamp?, asked: Int, completion: @escaping FetchCompletion
    ) -> LastLevelMiss {
        // What the store learned is the answer, unless an invalidation made it stale since: then the read fetches.
        guard let entry = entry(key),
            entry.generation == stamp.generation
                && (entry.confirmed.version == stamp.confirmedVersion || entry.staleness.isStale)
        else { return .learned(endLevelRead(key, since: stamp)) }
        entry.levelReads -= 1
        return .fetch(beginFetch(key, joining: true, since: since, asked: asked, completion: completion))
    }

    /// What the store knows of `key` now, for a read that goes on to the levels: a value it confirms before the
    /// read's fetch begins is the read's answer (see ``beginFetch(_:joining:since:asked:completion:)``).
    func stamp(of key: Key) -> ReadStamp {
        let entry = peek(key)
        return ReadStamp(
            generation: entry?.generation ?? 0, confirmedVersion: entry?.confirmed.version ?? 0,
            staleMark: entry?.staleness.mark ?? 0)
    }

    /// Where a read that begins now stands in the store's order: a change asked after it is applied again to what
    /// its fetch brings.
    var readStamp: Int { counter }
}

extension StoreMachine {
    /// Whether the levels are read for a key, or what the store knows answers instead (`nil`: a miss). The
    /// invalidations a hit is judged by are read from ``StoreMachine/staleRules(for:)`` under the same lock.
    enum LevelRead {
        /// Read the level; a hit counts only when the level is `inStep` with the store.
        case read(ReadStamp, inStep: Bool)
        case known(Snapshot?)
    }

    /// What a level read knew of its key when it started.
    struct ReadStamp: Sendable {
        let generation: Int
        let confirmedVersion: Int
        /// The entry's stale mark: one that changed while the level was read is an invalidation that matched the key.
        let staleMark: Int
    }

    /// What a level read's caller receives.
    struct HitReplyDelivery {
        init(reply: @escaping HitReply, snapshot: Snapshot) {
            self.reply = reply
            self.snapshot = snapshot
        }

        let reply: HitReply
        let snapshot: Snapshot
    }
}
