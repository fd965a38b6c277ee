#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// Submits a change of `key`'s confirmed value. The caller that finds the key's queue idle gets its first
    /// ``Step`` and runs the queue until ``nextChange(of:now:)`` returns `nil`, or a step's effects end its turn
    /// (``Effects/endsTurn``); others get ``Step/queued``.
    mutating func submit(_ job: Job, for key: Key, now: Date) -> Step {
        let entry = ensureEntry(key)
        if job.endsLevelRead { entry.levelReads -= 1 }  // the read is over; what it found is judged in order
        if case .fetched(_, let id) = job, !entry.work.fetches.contains(id) {
            release(key)
            var dropped = Effects(garbage: [job])  // every caller left: nothing to confirm
            dropped.endsTurn = true  // and this caller never had the key's turn
            return .applied(dropped)
        }
        guard entry.work.turn.take() else {
            enqueue(job, on: entry)
            return .queued
        }
        // The key's turn is free: a change needing neither the levels' value nor a closure applies at once.
        if !entry.work.turn.hasQueued, entry.confirmed.isKnown || !job.needsBase, job.changes(in: entry) == nil {
            entry.work.turn.apply(askedAt: next())
            return .applied(endTurnIfDone(apply(job, to: key, value: job.base(in: entry), now: now), for: key))
        }
        enqueue(job, on: entry)
        return nextStep(for: key, now: now)
    }

    /// Puts `job` last in its key's queue, with when it was asked: a fetch that begins later does not count it as a
    /// change made while it was in flight, however late it is applied.
    mutating func enqueue(_ job: Job, on entry: Entry) {
        entry.work.enqueue(job, askedAt: next(), spare: &spareJobs)
    }

    /// A write of `key` applied at once when its turn is free. When the caller issues the key's level operations
    /// (``Effects/issueLevels``) and the write's save is the only one, it is handed out taken in `save`: the caller
    /// issues it, then the rest through ``takeLevelOps(of:)``, and the key keeps its operations' storage for its
    /// next write. `nil`, having changed nothing, while the key's changes run: the write then waits its turn through
    /// ``submit(_:for:now:)``. The same as submitting it, without building a job and a step: a quarter of a write's
    /// cost (the benchmarks' README, *What the store's fast paths buy*). (The save is not returned beside the effects:
    /// an optional pair of them is destroyed through generic value witnesses.)
    mutating func writeAtOnce(_ stored: StoredValue<Value>, for key: Key, save: inout LevelOp?)
        -> Effects?
    {
        let entry = ensureEntry(key)
        guard entry.work.turn.isFree else { return nil }
        entry.work.turn.apply(askedAt: next())
        let effects = confirmWrite(stored, for: key)
        endAtOnce(entry, of: key, issuing: effects.issueLevels, save: &save)
        return effects
    }

    /// What fetch `id` brought, confirmed at once when `key`'s turn is free and no change was logged while fetches
    /// ran (there is none to apply again): the same as submitting ``Job/fetched(_:fetch:)``, without building a job
    /// and a step. The save is handed out in `save`, as ``writeAtOnce(_:for:save:)`` hands it out. `nil`, having
    /// changed nothing, otherwise (the fetch is over, the key's changes run, or some were logged): the value then
    /// takes its turn through ``submit(_:for:now:)``.
    mutating func fetchedAtOnce(
        _ value: Value, fetch id: Int, for key: Key, now: Date, save: inout LevelOp?
    ) -> Effects? {
        guard let entry = entry(key), entry.work.turn.isFree, entry.log.isEmpty,
            entry.work.fetches.contains(id)
        else { return nil }
        entry.work.turn.apply(askedAt: next())
        let effects = confirmFetch(id, for: key, value: value, now: now)
        endAtOnce(entry, of: key, issuing: effects.issueLevels, save: &save)
        return effects
    }

    /// Ends a change of `key` (its `entry`) applied at once: when its caller issues the key's level operations and the change's
    /// save is the only one, the save is handed out in `save` (moved out, the key keeping its list's storage); then
    /// the key is let go if nothing else needs it.
    mutating func endAtOnce(_ entry: Entry, of key: Key, issuing: Bool, save: inout LevelOp?) {
        if issuing, let only = takeOnlyLevelOp(of: key) { save = only }
        release(key)
    }

    /// `key`'s level operation when it is its only one, taken for the caller that issues its level operations
    /// (``Effects/issueLevels``) to issue first, the key keeping its list's storage; `nil`, changing nothing, when it
    /// has none or more. The caller then takes the rest through ``takeLevelOps(of:)``, which lets the key go when
    /// nothing else needs it.
    mutating func takeOnlyLevelOp(of key: Key) -> LevelOp? {
        entry(key)?.work.takeOnlyLevelOp(spare: &spareOps, debounced: debouncedLevels)
    }

    /// A level save of `key` landed: a failure keeps the value in the store until a newer one is saved; a stale value
    /// saved is recorded stale as of `date` (after the level stamped it). Returns a record folded out of the limit,
    /// to release after unlocking, and the flushes that waited for it last (see ``flushDebounced(of:ticket:)``), to
    /// release after unlocking too. A debounced write's save (`flushedLevel`) landing lets the write that waited for
    /// it go: `issues` then says the caller issues the key's level operations, and `released` is to release after
    /// unlocking.
    mutating func saveLanded(
        _ key: Key, matching matches: (@Sendable (AnyKey) -> Bool)?, mark: SaveMark, failed: Bool, at date: Date,
        flushedLevel: Int? = nil
    ) -> (folded: Invalidation?, flushed: [SaveTicket], issues: Bool, released: (any CancellationToken)?) {
        if !failed { invalidations.noteStamp(date) }
        var folded: Invalidation?
        // Stale since the invalidation it was saved under: a fetch sent after that one makes it fresh.
        if mark.stale, let matches {
            folded = invalidations.record(matches, at: date, as: mark.staleSince)
        }
        guard let entry = entry(key) else { return (folded, [], false, nil) }
        let flushed = entry.work.saves.land(
            version: mark.version, failed: failed, current: entry.generation == mark.generation)
        var (issues, released): (Bool, (any CancellationToken)?) = (false, nil)
        if let level = flushedLevel {
            let next = entry.work.writes.flushLanded(at: level)
            released = next.timer
            if next.issues { issues = startIssuing(key) }
        }
        release(key)
        return (folded, flushed, issues, released)
    }

    /// The next step of `key`'s queue, after a step's effects were performed; `nil` when the queue is empty (the
    /// caller stops running it).
    mutating func nextChange(of key: Key, now: Date) -> Step? {
        guard let entry = entry(key) else { return nil }
        guard entry.work.turn.hasQueued else {
            entry.work.endTurn(spare: &spareJobs)
            release(key)
            return nil
        }
        return nextStep(for: key, now: now)
    }

    mutating func nextStep(for key: Key, now: Date) -> Step {
        let entry = entry(key, heldBecause: "a change of the key is queued")
        guard let job = entry.work.turn.head else {
            preconditionFailure("A key's next change is asked with none queued")
        }
        if !entry.confirmed.isKnown, job.needsBase { return .loadBase(generation: entry.generation) }
        guard let changes = job.changes(in: entry) else {
            _ = entry.work.turn.takeHead()
            return .applied(endTurnIfDone(apply(job, to: key, value: job.base(in: entry), now: now), for: key))
        }
        entry.work.turn.headStartsRunning()
        return .run(Work(generation: entry.generation, base: job.base(in: entry), changes: changes))
    }

    /// Gives up `key`'s turn when its queue is empty after a change, before the change's effects are performed:
    /// a read or change asked while they run (a reply's caller reading again) finds the key idle.
    mutating func endTurnIfDone(_ effects: consuming Effects, for key: Key) -> Effects {
        guard let entry = entry(key), !entry.work.turn.hasQueued else { return effects }
        entry.work.endTurn(spare: &spareJobs)
        effects.endsTurn = true
        release(key)
        return effects
    }

    /// Commits the result of the ``Work`` that ran for the change at the head of `key`'s queue, and ends the turn
    /// when the queue is empty.
    mutating func commit(_ work: Work, result: Value?, for key: Key, now: Date) -> Effects {
        endTurnIfDone(commitWork(work, result: result, for: key, now: now), for: key)
    }

    mutating func commitWork(_ work: Work, result: Value?, for key: Key, now: Date) -> Effects {
        guard let entry = entry(key), entry.work.turn.hasQueued else { return Effects() }
        let job = entry.work.turn.takeHead()
        guard entry.generation == work.generation else {
            // Removed or cleared while it ran: an update is dropped (the removal was asked later), a settle runs
            // again on what is confirmed now, a fetch or a hit is judged stale and answers its callers.
            switch job {
            case .update, .write, .load, .serverCopy:
                return Effects(fetchReplies: job.droppedReply.map { [$0] } ?? [], garbage: [job, result as Any])
            case .settle:
                entry.work.turn.putBack(job)
            case .flush, .barrier, .add, .replace: return apply(job, to: key, value: nil, now: now)
            case .fetched, .hit, .external: return apply(job, to: key, value: result, now: now)
            }
            return Effects(garbage: [result as Any])
        }
        return apply(job, to: key, value: result, now: now)
    }

    /// Confirms what the levels hold for a key that was not known, read for the change at the head of its queue.
    /// The hit is stale since the invalidation `staleSince` when one made before the read matched it, or as an
    /// invalidation made during the read marked the entry (the change holds it).
    mutating func commitBase(
        _ hit: CachedValue<Value>?, level: Int, generation: Int, staleSince: Int?, for key: Key
    ) -> Effects {
        guard let entry = entry(key), entry.generation == generation, !entry.confirmed.isKnown else {
            return Effects(garbage: [hit as Any])
        }
        // Not known until now: there is no value to replace.
        guard let hit else {
            _ = entry.confirmed.set(nil)
            return Effects()
        }
        invalidations.noteStamp(hit.savedAt)
        let origin = StoreOrigin.cache(levelNames[level])
        _ = entry.confirmed.set(StoredValue(value: hit.value, origin: origin, savedAt: hit.savedAt))
        entry.staleness.markStale(at: staleSince ?? 0)
        return Effects(publish: publish(key))
    }

    // MARK: Optimistic changes

    /// Adds a pending optimistic change to `key`, with the load of its `commit` (not started yet: a clear fails it,
    /// as it fails every pending change's); returns its id, what the key shows with it (for its observers, when it
    /// has some), and whether the levels' value must be read first (submit ``Job/load``). A change with an `order`
    /// goes before the changes of its queue with a greater sequence (made earlier, shown later); others go last.
    /// `nil`, adding nothing, when the store was cleared since `clears` was read (`unlessClearedSince`).
    mutating func addMutation(
        _ change: @escaping Change, commit: PendingLoad<Void>? = nil, to key: Key, order: MutationOrder? = nil,
        unlessClearedSince clears: Int? = nil
    ) -> (id: Int, shown: Snapshot?, loads: Bool)? {
        if let clears, clears != self.clears { return nil }
        let entry = ensureEntry(key)
        let id = next()
        var mutation = Mutation(id: id, change: change, order: order)
        mutation.commit = commit
        guard !entry.work.turn.isTaken else {
            // Shown in order: after the changes asked before it.
            enqueue(.add(mutation), on: entry)
            return (id, nil, !entry.confirmed.isKnown)
        }
        entry.work.pending.insert(mutation)
        return (id, publish(key), !entry.confirmed.isKnown)
    }

    /// Remembers what `key` showed with its pending changes (see ``PendingChanges``), computed by a publisher
    /// outside the lock.
    mutating func remember(_ prefix: ShownPrefix, for key: Key, generation: Int) {
        guard let entry = entry(key), entry.generation == generation, entry.confirmed.version == prefix.confirmedVersion
        else { return }
        entry.work.pending.remember(prefix)
    }
}

extension StoreMachine {
    /// An optimistic change waiting for its commit.
    struct Mutation: Sendable {
        let id: Int
        let change: Change
        var commit: PendingLoad<Void>?
        /// Its place among the other changes of its queue (see ``MutationOrder``); `nil` for a change made alone.
        let order: MutationOrder?

        init(id: Int, change: @escaping Change, order: MutationOrder? = nil) {
            self.id = id
            self.change = change
            self.order = order
        }
    }
}
