#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreEngine {
    /// Performs what the machine decided, after unlocking, issuing `save` first when the machine handed one out
    /// (see ``StoreMachine/writeAtOnce(_:for:save:)``); what it dropped is released when `effects` goes. `key` is the
    /// key of the event, when it was one key's and the machine still uses it: the effects that name the key (level
    /// operations, debounced writes, a refetch) come only with a key the machine uses.
    func perform(
        _ effects: StoreMachine.Effects, for key: StoreKeyRef?, issuingFirst save: consuming StoreMachine.LevelOp? = nil
    ) {
        let more = effects.more
        if let more {
            for token in more.cancels { token.cancel() }
            for commit in more.failedCommits { commit.completeCancellingStep(.failure(StoreError.cleared)) }
        }
        // Borrowed, not copied.
        if effects.published != nil { publish(effects.published!) }
        for index in effects.publishedLater.indices { publish(effects.publishedLater[index]) }
        // The entities shared with other stores learn the change before its callers hear of it (some hear once the
        // levels saved it): what a caller does next (a change of an entity elsewhere) finds this key among those
        // holding it. A key the machine no longer uses (a store that keeps no value and has no level) has nothing to
        // follow.
        if let observer = confirmations, let key, let source = effects.confirmedFrom {
            observer.confirmed(
                key.object, hash: key.hash, previous: effects.replaced?.value, value: effects.confirmedValue,
                source: source)
        }
        if let more, !more.debounce.isEmpty {
            let key = Self.named(key, for: "a debounced write")
            for write in more.debounce { debounce(key, level: write.level, id: write.id) }
        }
        if effects.removeAll { removeAllFromLevels() }
        if effects.issueLevels { issueLevelOps(of: Self.named(key, for: "level operations"), first: save.take()) }
        if effects.refetches != 0 {
            startRefetch(effects.refetches, of: Self.named(key, for: "a refetch"))
        }
        guard let more else { return }
        for reply in more.fetchReplies { reply.completion(reply.result) }
        for delivery in more.hitReplies { delivery.reply(delivery.snapshot) }
        for ticket in more.released { ticket.release() }
    }

    /// The key of effects that name it: the machine decides them for a key it uses, so the caller has its object.
    private static func named(_ key: StoreKeyRef?, for work: String) -> StoreKeyRef {
        guard let key else { preconditionFailure("The machine decided \(work) for a key it does not use") }
        return key
    }

    /// Counts an observer of the key with `hash` that `isKey` recognizes (`make` makes its object) and returns the
    /// subject it subscribes to, after showing it the key's value now, if any. A key observed already has its subject
    /// (one lock); otherwise one is made outside the lock.
    @usableFromInline
    func startObserving(
        hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey
    ) -> ResponseSubject {
        let (subject, shown) =
            run(hash: hash, where: isKey, making: make) { $0.observe($1, fresh: nil) }
            ?? run(hash: hash, where: isKey, making: make) { $0.observe($1, fresh: ResponseSubject()) }!
        if let shown { publish(shown) }
        return subject
    }

    /// Forgets an observer of the key with `hash` that `isKey` recognizes; the last one takes the key's subject
    /// away (released here, after unlocking).
    @usableFromInline
    func stopObserving(hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey) {
        let subject = run(hash: hash, where: isKey, making: make) { $0.stopObserving($1) }
        withExtendedLifetime(subject) {}
    }

    /// Sends `snapshot` to the key's observers unless a newer version was sent already (publishes from several
    /// threads may arrive out of order). The shown value is computed here, outside the lock: it runs the pending
    /// changes.
    func publish(_ snapshot: borrowing StoreMachine.Snapshot) {
        guard let observed = snapshot.observed else { return }
        let response = snapshot.response
        // What the pending changes gave is remembered: the next change shown applies only itself.
        if let (key, generation, prefix) = snapshot.shownPrefix(response) {
            run { $0.remember(prefix, for: key, generation: generation) }
        }
        if let subject = observed.changes, !snapshot.isNotice { subject.send(response) }
        if let states = observed.states { publish(response, isLoading: snapshot.isLoading, to: states) }
    }

    /// Sends `response`, loading or not, to the key's state observers unless a newer state was sent already.
    private func publish(
        _ response: StoreResponse<StoreMachine.Value>, isLoading: Bool, to states: StoreMachine.StateSubject
    ) {
        let state = StoreState(response: response, isLoading: isLoading)
        states.update { current in
            guard (current?.version ?? -1) < state.version else { return nil }
            return state
        }
    }

    /// Publishes the notices for state observers of the keys that began or stopped loading during the events before
    /// (rarely any: only keys observed with ``Store/states(for:)``), and tells the store's events of the kept values
    /// let go of.
    func publishNotices() {
        let (notices, evicted) = runWithKeys { machine, keys in (machine.takeNotices(), keys.takeEvicted()) }
        for notice in notices { publish(notice) }
        if !evicted.isEmpty { hooks?.tellEvicted(evicted) }
    }

    // MARK: Levels

    /// Issues `key`'s level operations in the order they were decided, while there are any, starting with `first`
    /// (taken already, with the key's issuing); a clear's `removeAll` waiting for them is issued by the caller that
    /// issues the last.
    private func issueLevelOps(of key: StoreKeyRef, first: consuming StoreMachine.LevelOp? = nil) {
        if let first = first.take() { issue(first, of: key) }
        while let taken = run(key, { $0.takeLevelOps(of: $1) }) {
            if taken.removeAll { return removeAllFromLevels() }
            if let first = taken.ops.head { issue(first, of: key) }
            for operation in taken.ops.tail { issue(operation, of: key) }
        }
    }

    /// Sends one level operation to its levels.
    private func issue(_ operation: consuming StoreMachine.LevelOp, of key: StoreKeyRef) {
        let ticket = operation.ticket
        switch consume operation {  // its payload moved out, not copied
        case .save(let value, let savedAt, let targets, let skipsDebounced, _, let answersFetch, let mark):
            let landed = landedCompletion(of: key, mark: mark, ticket: ticket)
            let landing = StoreMachine.SaveTicket.Landing(engine: self, key: key, mark: mark)
            for index in targets where !skipsDebounced || levels[index].writeDebounce == nil {
                guard !(answersFetch && levels[index].savesInBackground) else {
                    let inBackground = saveLanded(of: key, mark: mark, then: reportFailure.call)
                    save(value, savedAt: savedAt, of: key, at: index, place: mark.givenPlace, completion: inBackground)
                    continue
                }
                ticket?.hold(reportingTo: reportFailure, landing: landing)
                save(value, savedAt: savedAt, of: key, at: index, place: mark.givenPlace, completion: landed)
            }
        case .flush(let value, let savedAt, let index, _, let mark):
            ticket?.hold(reportingTo: reportFailure)
            // A flush's ticket may be held by the flushes of other levels and keys: the completion says where it
            // landed.
            let done: @Sendable (Result<Void, any Error>) -> Void =
                if let ticket { { ticket.landed($0) } } else { reportFailure.call }
            let landed = saveLanded(of: key, mark: mark, flushedLevel: index, then: done)
            levels[index].save(value, savedAt, key.object, landed)
        case .remove(let targets, _, let answersFetch, let mark):
            let landed = landedCompletion(of: key, mark: mark, ticket: ticket)
            let landing = StoreMachine.SaveTicket.Landing(engine: self, key: key, mark: mark)
            for index in targets {
                guard !(answersFetch && levels[index].savesInBackground) else {
                    let inBackground = saveLanded(of: key, mark: mark, then: reportFailure.call)
                    save(nil, savedAt: 0, of: key, at: index, place: mark.givenPlace, completion: inBackground)
                    continue
                }
                ticket?.hold(reportingTo: reportFailure, landing: landing)
                save(nil, savedAt: 0, of: key, at: index, place: mark.givenPlace, completion: landed)
            }
        case .waitForSaves(let flush):
            // The flush's hold goes to the saves in flight, when there are any.
            if run(key, { $0.flushWaits(flush, for: $1) }) { return }
        }
        ticket?.release()  // the operation's own hold: it is issued
    }

    /// The completion of the level writes of a save or a removal of `key`: with a ticket, one capturing the ticket
    /// alone (which knows where the writes land, and reports failures itself), so that it needs no storage of its
    /// own; a method reference or an optional chain here would make more.
    private func landedCompletion(
        of key: StoreKeyRef, mark: StoreMachine.SaveMark, ticket: StoreMachine.SaveTicket?
    ) -> @Sendable (Result<Void, any Error>) -> Void {
        guard let ticket else { return saveLanded(of: key, mark: mark, then: reportFailure.call) }
        return { ticket.landed($0) }
    }

    /// Saves `value` of `key` to level `index` (removes it, `value` being `nil`); the shared level's change keeps the
    /// place the store gave it as it made the change, if it has one.
    private func save(
        _ value: StoreMachine.Value?, savedAt: Double, of key: StoreKeyRef, at index: Int, place: UInt64?,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        if index == sharedLevel, let place, let sharedOrder {
            sharedOrder.change(key.object, to: value, savedAt: savedAt, at: place, completion: completion)
        } else if let value {
            levels[index].save(value, savedAt, key.object, completion)
        } else {
            levels[index].removeValue(key.object, completion)
        }
    }

    /// `done`, after telling the machine that a save of `key` landed (see ``saveLanded(of:mark:flushedLevel:result:)``).
    private func saveLanded(
        of key: StoreKeyRef, mark: StoreMachine.SaveMark, flushedLevel: Int? = nil,
        then done: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> @Sendable (Result<Void, any Error>) -> Void {
        { [self] result in
            let flushed = saveLanded(of: key, mark: mark, flushedLevel: flushedLevel, result: result)
            done(result)
            for flush in flushed { flush.release() }  // a flush that waited for this save, after unlocking
        }
    }

    /// Tells the machine that a save of `key` landed (see ``StoreMachine/saveLanded(_:matching:mark:failed:at:flushedLevel:)``),
    /// then issues the debounced write that waited for it; returns the flushes that waited for it, to release once
    /// the save's own work is done.
    func saveLanded(
        of key: StoreKeyRef, mark: StoreMachine.SaveMark, flushedLevel: Int? = nil,
        result: Result<Void, any Error>
    ) -> [StoreMachine.SaveTicket] {
        let failed = if case .failure = result { true } else { false }
        let now = now()
        var matches: (@Sendable (StoreMachine.AnyKey) -> Bool)?
        if mark.stale { matches = { key.matches($0) } }
        let (folded, flushed, issues, released) = run(key) {
            $0.saveLanded($1, matching: matches, mark: mark, failed: failed, at: now, flushedLevel: flushedLevel)
        }
        withExtendedLifetime((folded, released)) {}
        if issues { issueLevelOps(of: key) }  // the debounced write that waited for this save
        return flushed
    }

    /// Empties the levels the clears waiting empty (every level, or those faster than a level another process
    /// emptied), then issues the level operations held behind them; the clears' completions run once those levels
    /// are empty.
    private func removeAllFromLevels() {
        let progress = Locked<(remaining: Int, completions: [@Sendable () -> Void]?)>((levels.count, nil))
        let finish: @Sendable () -> Void = {
            let completions = progress.withLock { progress -> [@Sendable () -> Void] in
                guard progress.remaining == 0, let completions = progress.completions else { return [] }
                progress.completions = []
                return completions
            }
            for completion in completions { completion() }
        }
        let emptied: @Sendable (Result<Void, any Error>) -> Void = { [reportFailure] result in
            reportFailure.call(result)
            progress.withLock { $0.remaining -= 1 }
            finish()
        }
        let (toEmpty, place) = run { ($0.levelsToEmpty, $0.clearPlace) }
        let first = min(toEmpty, levels.count)
        for index in 0..<first { removeAll(fromLevel: index, at: place, completion: emptied) }
        let (completions, held, count, later) = runWithKeys { machine, keys in
            let (completions, held, count, place) = machine.removeAllIssued()
            return (completions, held.map { keys.ref(at: $0) }, count, place)
        }
        // A clear of more levels that joined while the first were emptied: the rest, before the held operations.
        let last = max(first, min(count, levels.count))
        for index in first..<last { removeAll(fromLevel: index, at: later, completion: emptied) }
        progress.withLock {
            $0.remaining -= levels.count - last
            $0.completions = completions
        }
        finish()
        for key in held { issueLevelOps(of: key) }
    }

    /// Empties level `index`; the shared level at the clear's `place` in the processes' order, when it has one
    /// (``StoreMachine/SaveMark/unplaced`` and `nil`: one is taken now).
    private func removeAll(
        fromLevel index: Int, at place: UInt64?, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        guard index == sharedLevel, let sharedOrder else { return levels[index].removeAll(completion) }
        let given = place.flatMap { $0 == StoreMachine.SaveMark.unplaced ? nil : $0 }
        sharedOrder.removeAll(at: given, completion: completion)
    }

    /// Starts the timer of a debounced write. The timer keeps the core alive until it fires: a store released with
    /// a write pending still writes it.
    private func debounce(_ key: StoreKeyRef, level: Int, id: Int) {
        guard let interval = levels[level].writeDebounce else { return }
        let timer = levels[level].scheduler.schedule(after: interval) { [self] in
            perform(run(key) { $0.debounceFired(id, level: level, for: $1) }, for: key)
        }
        run(key) { $0.keepTimer(timer, ofWrite: id, level: level, for: $1) }?.cancel()
    }
}
