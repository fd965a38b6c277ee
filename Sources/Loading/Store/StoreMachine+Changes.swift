#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's changes: their turn (submitted, queued, run one at a time, committed), what each confirms, and the
// confirmed value itself (`ConfirmedValue`), the one place a key's truth changes.

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

extension StoreMachine {
    /// Applies `job` to `key`, `value` being its closures' result (or its base when it has none).
    mutating func apply(_ job: Job, to key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        switch job {
        case .write(let stored):
            return confirmWrite(stored, for: key)
        case .serverCopy(let stored, let mutation):
            guard entry.work.pending.mutation(mutation) != nil else { return Effects(garbage: [stored]) }
            return confirmWrite(stored, for: key, source: .serverCopy)
        case .update(let change, let reply, let replays, let source):
            // Not applied again by a fetch in flight, unless it `replays` (a change noted as made while none was).
            let change = replays || entry.work.fetches.isEmpty ? change : nil
            guard entry.confirmed.value != nil || value != nil else {
                // Nothing to change; a fetch in flight gets it applied to what it brings.
                if let change { log(change, for: key) }
                let answer = reply.map { FetchReply(completion: $0, result: .success(shownNow(key))) }
                return Effects(fetchReplies: answer.map { [$0] } ?? [])
            }
            let stored = value.map { StoredValue(value: $0, origin: reply == nil ? .local : .network, savedAt: now) }
            changeMakesFresh(key)
            guard let reply else {
                return confirm(
                    stored, for: key, logging: change, levels: levelNames.indices, debounces: true, source: source)
            }
            let saved = SaveTicket()
            let effects = confirm(
                stored, for: key, logging: change, levels: levelNames.indices, ticket: saved, answers: true)
            let shown = effects.publishedLater.last ?? effects.published!
            saved.whenSaved(.replies(InlineFirstArray(FetchReply(completion: reply, result: .success(shown)))))
            return effects
        case .fetched(_, let id):
            return confirmFetch(id, for: key, value: value, now: now)
        case .hit(let cached, let level, let stamp, let staleSince, let error, let reply):
            return confirmHit(
                cached, level: level, stamp: stamp, staleSince: staleSince, error: error, reply: reply, for: key)
        case .external(let cached, let level, let stamp):
            return confirmExternal(cached, level: level, stamp: stamp, for: key)
        case .settle(let id, let accepted, let ticket, let replacing):
            // Those settled meanwhile are not changed.
            let replaced = replacing.map { entry.work.pending.replace($0) }
            var effects = settle(id, accepted: accepted, ticket: ticket, for: key, value: value, now: now)
            if let replacing { effects.garbage += [replaced as Any, replacing] }
            return effects
        case .load:
            return Effects()
        case .flush(let ticket):
            return flushDebounced(of: key, ticket: ticket)
        case .barrier(let reply):
            // The read holds the key until it went on (``endLevelRead(_:since:)``): the key it waited for is not let
            // go of, with what the changes before it made, between its turn and its next step.
            holdKey(key)
            return Effects(fetchReplies: [FetchReply(completion: { _ in reply() }, result: .success(shownNow(key)))])
        case .add(let mutation):
            entry.work.pending.insert(mutation)
            return Effects(publish: publish(key))
        case .replace(let replacement):
            // Those settled meanwhile are not shown again.
            let replaced = entry.work.pending.replace(replacement)
            guard !replaced.isEmpty else { return Effects(garbage: [replacement]) }
            return Effects(publish: publish(key), garbage: [replaced, replacement])
        }
    }

    /// Confirms a value the app wrote, for every level (a debounced one gets it with its burst).
    mutating func confirmWrite(
        _ stored: StoredValue<Value>, for key: Key, source: ConfirmationSource = .change
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        changeMakesFresh(key)
        // Logged for a fetch in flight only (see ``log(_:for:)``): no closure is made otherwise.
        var change: Change?
        if entry.work.fetches.isEmpty {
            entry.log.skip(askedAt: entry.work.turn.asking)
        } else {
            change = { _ in stored.value }
        }
        return confirm(stored, for: key, logging: change, levels: levelNames.indices, debounces: true, source: source)
    }

    mutating func confirmFetch(_ id: Int, for key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard let fetch = entry.work.fetches.end(id) else { return Effects(garbage: [value as Any]) }
        fetchEnded(entry)
        let rebased = entry.log.hasChanges(for: fetch)
        // A refetch this fetch owed stands where it would have been sent had the store known of the answer at once
        // (the answer, or the invalidation after it): the changes asked since are applied again to what it brings.
        let replays = max(entry.work.turn.asking, entry.staleness.mark)
        defer { trimLog(of: key) }
        guard fetch.generation == entry.generation else {
            let replies = fetch.callers.map {
                FetchReply(completion: $0.completion, result: .failure(StoreError.discarded))
            }
            var effects = Effects(fetchReplies: replies, garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        guard entry.work.fetches.confirm(id) else {
            // A fetch started after this one was confirmed first: what it brought stays, and is the answer.
            let shown = shownNow(key)
            var effects = Effects(
                fetchReplies: fetch.callers.map { FetchReply(completion: $0.completion, result: .success(shown)) },
                garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        // Sent after the invalidation: fresh.
        if let sent = fetch.sentMark, sent > entry.staleness.mark { makeFresh(key, from: sent) }
        // A value another process saved to a shared level keeps its date, and goes to the faster levels only.
        var (origin, savedAt, levels) = (StoreOrigin.network, now, levelNames.indices)
        if rebased {
            origin = .local
        } else if let answer = fetch.levelAnswer {
            savedAt = Date(timeIntervalSinceReferenceDate: answer.savedAt)
            (origin, levels) = (.cache(levelNames[answer.level]), 0..<answer.level)
            invalidations.noteStamp(savedAt)
        }
        let stored = value.map { StoredValue(value: $0, origin: origin, savedAt: savedAt) }
        // The callers are answered once the value is saved to the levels (but those saving in the background).
        let saved = SaveTicket()
        var effects = confirm(
            stored, for: key, logging: nil, levels: levels, ticket: saved, answers: true, answersFetch: true)
        let shown = effects.publishedLater.last ?? effects.published!
        saved.whenSaved(
            .replies(fetch.callers.mapInline { FetchReply(completion: $0.completion, result: .success(shown)) }))
        effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
        return effects
    }

    mutating func confirmHit(
        _ cached: CachedValue<Value>, level: Int, stamp: ReadStamp, staleSince: Int?, error: (any Error)?,
        reply: @escaping HitReply, for key: Key
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard entry.generation == stamp.generation, entry.confirmed.version == stamp.confirmedVersion else {
            // The store learned something newer while the level was read (a write, a removal, a clear): what it
            // shows now is the answer, never the level's older value.
            return Effects(hitReplies: [HitReplyDelivery(reply: reply, snapshot: shownNow(key))], garbage: [cached])
        }
        invalidations.noteStamp(cached.savedAt)
        let stored = StoredValue(value: cached.value, origin: .cache(levelNames[level]), savedAt: cached.savedAt)
        // Stale as the invalidations recorded before the read judged the level's value (`staleSince`), or as one
        // that matched the key while it was read: that one marked the entry, which the read holds.
        entry.staleness.confirmLevelValue(staleSince: staleSince, markWhenRead: stamp.staleMark)
        var effects = confirm(
            stored, for: key, logging: nil, levels: 0..<level, error: error, answers: true, source: .level)
        let shown = effects.publishedLater.last ?? effects.published!
        effects.hitReplies = [HitReplyDelivery(reply: reply, snapshot: shown)]
        return effects
    }

    /// Confirms what a shared level holds after another process changed the key there (`nil`: it removed it), for
    /// the faster levels only: the shared level is not written back. Unless the store learned something of the key
    /// while the level was read (a write, a fetch, a removal, a clear): that is newer, and its own save will tell
    /// the other processes.
    mutating func confirmExternal(
        _ cached: CachedValue<Value>?, level: Int, stamp: ReadStamp, for key: Key
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard entry.generation == stamp.generation, entry.confirmed.version == stamp.confirmedVersion else {
            return Effects(garbage: [cached as Any])
        }
        guard let cached else { return confirm(nil, for: key, logging: nil, levels: 0..<level) }
        invalidations.noteStamp(cached.savedAt)
        entry.staleness.confirmLevelValue(staleSince: nil, markWhenRead: stamp.staleMark)
        let stored = StoredValue(value: cached.value, origin: .cache(levelNames[level]), savedAt: cached.savedAt)
        return confirm(stored, for: key, logging: nil, levels: 0..<level)
    }

    mutating func settle(
        _ id: Int, accepted: Bool, ticket: SaveTicket?, for key: Key, value: Value?, now: Date
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard
            let mutation = entry.work.pending.remove(id, accepted: accepted, confirmedVersion: entry.confirmed.version)
        else {
            return Effects(garbage: [value as Any], released: ticket.map { [$0] } ?? [])
        }
        guard accepted else {
            return Effects(
                publish: publish(key), garbage: [mutation, value as Any], released: ticket.map { [$0] } ?? [])
        }
        let stored = value.map { StoredValue(value: $0, origin: .local, savedAt: now) }
        changeMakesFresh(key)
        var effects = confirm(stored, for: key, logging: mutation.change, levels: levelNames.indices, ticket: ticket)
        effects.garbage.append(mutation)
        return effects
    }

    /// Turns `key`'s debounced writes into level operations now (a flush), cancelling their timers; `ticket` (held
    /// once for the flush of this key) is held by each, and by the key's saves in flight now (writes issued before
    /// the flush, still on their way to a level) until they land. Operations decided before the flush and not issued
    /// yet (another caller is issuing the key's) are waited for too: the ticket waits behind them, and for their
    /// saves once they are issued.
    mutating func flushDebounced(of key: Key, ticket: SaveTicket) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        var effects = Effects()
        if entry.work.writes.hasOps {
            decide(.waitForSaves(ticket: ticket), for: entry)
        } else if !entry.work.saves.whenLanded(ticket) {
            effects.released = [ticket]
        }
        effects.cancels = entry.work.writes.flushDebounced(holding: ticket)
        effects.issueLevels = startIssuing(key)
        return effects
    }

    /// The keys a flush asks: those with debounced writes or level operations waiting, changes queued or running
    /// (which may make some), or saves on their way to a level.
    func keysToFlush() -> [Key] {
        entries.compactMap { key, slot in
            guard case .inUse(let entry) = slot else { return nil }
            return entry.work.writes.isSettled && entry.work.turn.isFree && !entry.work.saves.hasInFlight ? nil : key
        }
    }

    /// Replaces `key`'s confirmed value, notes the change for the fetches in flight, decides the level writes and
    /// publishes the new shown value (the last of ``Effects/published`` and ``Effects/publishedLater`` when it
    /// `answers` a caller too). When `debounces`, the debounced levels are written when their timers fire; otherwise
    /// every level at once (a debounced write waiting is dropped: this one is newer). The writes hold `ticket`,
    /// released at once when there are none (the writes of the levels saving in the background do not, when it
    /// `answersFetch`).
    mutating func confirm(
        _ stored: StoredValue<Value>?, for key: Key, logging change: Change?, levels targets: Range<Int>,
        error: (any Error)? = nil, debounces: Bool = false, ticket: SaveTicket? = nil, answers: Bool = false,
        answersFetch: Bool = false, source: ConfirmationSource = .change
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        var effects = Effects()
        effects.replaced = entry.confirmed.set(stored)  // moved out, released after unlocking
        if reportsConfirmations {
            (effects.confirmedFrom, effects.confirmedValue) = (source, stored?.value)
        }
        if let change { log(change, for: key) }
        let mark = saveMark(
            for: key, generation: entry.generation, version: entry.confirmed.version, staleSince: entry.staleness.mark,
            targets: targets, debounces: debounces)
        if let stored {
            if !targets.isEmpty {
                decide(
                    .save(
                        stored.value, savedAt: stored.savedAtSeconds, levels: targets, skipsDebounced: debounces,
                        ticket: ticket, answersFetch: answersFetch, mark: mark), for: entry)
            } else if let ticket {
                effects.released.append(ticket)
            }
            for level in targets where !debouncedLevels.isEmpty && debouncedLevels.contains(level) {
                guard debounces else {
                    if let dropped = entry.work.writes.dropDebounced(at: level) { effects.cancels.append(dropped) }
                    continue
                }
                let write = DebouncedWrite(
                    id: next(), value: stored.value, savedAt: stored.savedAtSeconds, mark: mark, timer: FinishedToken())
                if let replaced = entry.work.writes.debounce(write, at: level) { effects.cancels.append(replaced) }
                effects.debounce.append(DebounceStart(level: level, id: write.id, value: stored.value))
            }
        } else {
            effects.cancels += entry.work.writes.dropDebounced()
            decide(.remove(levels: targets, ticket: ticket, answersFetch: answersFetch, mark: mark), for: entry)
        }
        effects.publish(publish(key, error: error, answers: answers))
        effects.issueLevels = startIssuing(key)
        return effects
    }
}

extension StoreMachine {
    /// A key's confirmed value: what the store holds as the key's truth, changed in one place, ``set(_:)``, by a
    /// change, a fetch, a level's value learned for a change, a removal or a clear.
    ///
    /// Invariants, which the rest of the machine relies on:
    /// - Once known, always known: before, the levels hold the key's truth and there is no value here.
    /// - `version` counts the values set, and never goes back: a reader stamped with an older one knows that the
    ///   value changed since (a level's value read then is older than the store's).
    /// - The response a read answered with at once is shared by the next such reads while neither the value nor what
    ///   the key shows changed since it was built.
    struct ConfirmedValue {
        /// The value, when known and there is one (none after a removal or a clear).
        private(set) var value: StoredValue<Value>?
        /// Whether `value` is the key's truth.
        private(set) var isKnown = false
        /// How many values were set.
        private(set) var version = 0
        /// The response a read answered with at once last, built at `version` `hitVersion`.
        private var hit: StoreResponse<Value>?
        private var hitVersion = 0

        /// Makes `newValue` (`nil`: none, the key was removed or cleared) the key's truth, as a new version. Returns
        /// the value it replaces, to release after unlocking.
        mutating func set(_ newValue: StoredValue<Value>?) -> StoredValue<Value>? {
            isKnown = true
            version += 1
            return exchange(&value, with: newValue)
        }

        /// The response a read answered with at once last, when neither the value nor what the key shows (its
        /// version `shown`) changed since: the next such read shares it.
        func sharedHit(shown: Int) -> StoreResponse<Value>? {
            guard let hit, hitVersion == version, hit.version == shown else { return nil }
            return hit
        }

        /// A new response for a read answering at once with the value, shown as version `shown` of the key, kept
        /// for the next such reads (see ``sharedHit(shown:)``); the storage of the one it replaces goes to
        /// `released`, to release after unlocking. `nil` when there is no value.
        mutating func makeHit(
            shown: Int, released: inout (any AnyObject & Sendable)?
        ) -> StoreResponse<Value>? {
            guard let value else { return nil }
            let response = StoreResponse<Value>(
                box: value.value, origin: value.origin, savedAtSeconds: value.savedAtSeconds,
                hasPendingChanges: false, error: nil, version: shown)
            released = hit?.storage
            (hit, hitVersion) = (response, version)
            return response
        }
    }
}
