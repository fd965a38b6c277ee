#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Submits a change of `key`'s confirmed value, and runs the key's queue when it was idle.
    @inlinable
    func submit(_ job: Machine.Job, for key: Key) {
        let now = now()
        runChanges(of: key, from: locked(key) { $0.submit(job, for: $1, now: now) })
    }

    /// Runs `key`'s queued changes, starting with `first` (or the next one when `nil`), until the queue is empty
    /// or waits for a level read. A change's closures run here, outside the lock.
    @inlinable
    func runChanges(of key: Key, from first: Machine.Step?) {
        var given = first
        while true {
            // Taken and consumed, not copied: a step's effects hold several arrays.
            let step: Machine.Step
            if let taken = given.take() {
                step = taken
            } else {
                let now = now()
                guard let next = locked(key, { $0.nextChange(of: $1, now: now) }) else { return }
                step = next
            }
            switch consume step {
            case .queued:
                return
            case .loadBase(let generation):
                return loadBase(of: key, generation: generation)
            case .applied(let effects):
                perform(effects, for: key)
                if effects.endsTurn { return }
            case .run(let work):
                let result = work.run()
                let now = now()
                let effects = locked(key) { $0.commit(work, result: result, for: $1, now: now) }
                perform(effects, for: key)
                if effects.endsTurn { return }
            }
        }
    }

    // MARK: Effects

    /// Performs what the machine decided, after unlocking, issuing `save` first when the machine handed one out
    /// (see ``StoreMachine/writeAtOnce(_:for:save:)``); what it dropped is released when `effects` goes.
    @inlinable
    func perform(_ effects: Machine.Effects, for key: Key?, issuingFirst save: Machine.LevelOp? = nil) {
        let more = effects.more
        if let more {
            for token in more.cancels { token.cancel() }
            for commit in more.failedCommits { commit.completeCancellingStep(.failure(StoreError.cleared)) }
        }
        // Borrowed, not copied.
        if effects.published != nil { publish(effects.published!) }
        for index in effects.publishedLater.indices { publish(effects.publishedLater[index]) }
        if let key, let more {
            for write in more.debounce {
                debounce((write.value as! ValueBox<Value>).value, for: key, level: write.level, id: write.id)
            }
        }
        if effects.removeAll { removeAllFromLevels() }
        if effects.issueLevels, let key { issueLevelOps(of: key, first: save) }
        if effects.refetches != 0, let key { startRefetch(effects.refetches, of: key) }
        guard let more else { return }
        for reply in more.fetchReplies { reply.completion(reply.result) }
        for delivery in more.hitReplies { delivery.reply(delivery.snapshot) }
        for ticket in more.released { ticket.release() }
    }

    /// Sends `snapshot` to the key's observers unless a newer version was sent already (publishes from several
    /// threads may arrive out of order). The shown value is computed here, outside the lock: it runs the pending
    /// changes.
    @inlinable
    func publish(_ snapshot: borrowing Snapshot) {
        guard let observed = snapshot.observed else { return }
        let response = snapshot.response
        // What the pending changes gave is remembered: the next change shown applies only itself.
        if let (key, generation, prefix) = snapshot.shownPrefix(response) {
            locked { $0.remember(prefix, for: key, generation: generation) }
        }
        if let subject = observed.changes, !snapshot.isNotice { subject.send(response) }
        if let states = observed.states { publish(response, isLoading: snapshot.isLoading, to: states) }
    }

    /// Sends `response`, loading or not, to the key's state observers unless a newer state was sent already.
    @usableFromInline
    func publish(_ response: StoreResponse<Machine.Value>, isLoading: Bool, to states: Machine.StateSubject) {
        let state = StoreState(response: response, isLoading: isLoading)
        states.update { current in
            guard (current?.version ?? -1) < state.version else { return nil }
            return state
        }
    }

    /// Publishes the notices for state observers of the keys that began or stopped loading during the events before
    /// (rarely any: only keys observed with ``states(for:)``), and tells `events` of the kept values let go of.
    @usableFromInline
    func publishNotices() {
        let (notices, evicted) = lockedWithKeys { machine, keys in (machine.takeNotices(), keys.takeEvicted()) }
        for notice in notices { publish(notice) }
        if let events { for key in evicted { events(.evicted(Self.key(key))) } }
    }

    @inlinable
    func startObserving(_ key: Key) -> Machine.Subject {
        // A key observed already has its subject: one lock. Otherwise one is made outside the lock.
        let (subject, shown) =
            locked(key) { $0.observe($1, fresh: nil) }
            ?? locked(key) { $0.observe($1, fresh: Machine.Subject()) }!
        if let shown { publish(shown) }
        return subject
    }

    /// Counts a state observer of `key`, and shows it the key's state now.
    func startObservingStates(_ key: Key) -> Machine.StateSubject {
        let (subject, now) =
            locked(key) { $0.observeStates($1, fresh: nil) }
            ?? locked(key) { $0.observeStates($1, fresh: Machine.StateSubject(nil)) }!
        publish(now)
        return subject
    }

    func stopObservingStates(_ key: Key) {
        let subject = locked(key) { $0.stopObservingStates($1) }
        withExtendedLifetime(subject) {}  // released after unlocking
    }

    @inlinable
    func stopObserving(_ key: Key) {
        let subject = locked(key) { $0.stopObserving($1) }
        withExtendedLifetime(subject) {}  // released after unlocking
    }
}
