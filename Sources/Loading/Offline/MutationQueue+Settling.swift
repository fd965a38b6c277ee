import Dispatch

// Showing a mutation as a change of its key, settling it with the store, and a logout.
extension MutationQueue {
    /// Shows the change of `record` (in the queue already) in the store, its commit waiting for the server; `false`,
    /// showing nothing, when a clear began since the mutation was numbered (`numberedBefore` clears) or since
    /// `storeClears` was read. The mutation is then out of the queue. A mutation that left the queue while it was
    /// shown (discarded, or taken out with the creation of an item it names) settled so: its change is undone, and
    /// this is `true`.
    func show(_ record: StoredMutation<Input>, numberedBefore clears: Int?, storeClears: Int) -> Bool {
        if let clears, ledger.withLock({ $0.clearBegan(since: clears) }) {
            _ = drop(record.id)
            return false
        }
        let input = record.input
        let apply: @Sendable (Value?) -> Value? = { [change] value in change(input, value) }
        let key = key(input)
        // Only a creation is rewritten as the store confirms it.
        var replacingOnAccept: (@Sendable () -> StoreMachine.Replacement?)?
        if creation != nil {
            replacingOnAccept = { [self, id = record.id] in changesShownOnAccept(of: id) }
        }
        let commit = Commit(queue: self, id: record.id)
        let order = MutationOrder(queue: identity, sequence: record.sequence)
        let completion: @Sendable (Result<Void, any Error>) -> Void = { [self] result in settled(record, result) }
        // In a store sharing entities, the copies the change makes show in every key holding them, as a
        // `Store.mutate` does (a creation's change, rewritten by the server's id, stays in its key).
        let sharing =
            creation == nil && store.entityObserver != nil
            ? store.mutateSharingEntities(
                key, apply, commit: AnyLoader(commit), order: order, unlessClearedSince: storeClears,
                completion: completion) : nil
        let shown =
            sharing
            ?? store.mutate(
                key, apply, commit: commit, order: order, unlessClearedSince: storeClears,
                replacingOnAccept: replacingOnAccept, completion: completion)
        guard let (changeID, undo) = shown else {
            _ = drop(record.id)
            return false
        }
        let change = ShownChange(id: changeID, key: key)
        // Rewritten before it was marked shown (an id the server gave meanwhile): shown again as it stands now.
        // Without creations nothing is rewritten.
        var rewritten: StoredMutation<Input>?
        let (isShown, cleared) = ledger.withLock { ledger in
            guard ledger.markShown(record.id, undo: undo, as: change, numberedBefore: clears) else {
                return (false, clears.map(ledger.clearBegan(since:)) ?? true)
            }
            if creation != nil, ledger.rewrites(of: record.id) != 0 {
                rewritten = ledger.record(record.id).map(StoredMutation.init)
            }
            return (true, false)
        }
        guard isShown else {
            // A clear began while it was being shown, or the mutation settled meanwhile: it is undone (a clear
            // cancels it too).
            undo.cancel()
            _ = drop(record.id)
            return !cleared
        }
        if let rewritten { showAgain([(change, rewritten.input)]) }
        publish()
        return true
    }

    /// The store's commit of a mutation's change: it completes with the server's answer.
    private struct Commit: Loader {
        let queue: MutationQueue
        let id: String

        func load(completion: @escaping LoadCompletion<Void>) -> any CancellationToken {
            queue.ledger.withLock { $0.keepCommit(completion, of: id) }
            // Cancelled by the store (a logout; it then settles the change as cleared), or by a discard.
            return AnyCancellationToken { [queue, id] in queue.commitCancelled(id) }
        }
    }

    /// The store settled a mutation's change (accepted and saved to every level, refused, or cleared): the storage
    /// forgets it, then an accepted mutation's attempt ends (its lease released: another process never sends it
    /// again) and the next is sent. A kill before leaves it kept, to send again.
    func settled(_ record: StoredMutation<Input>, _ result: Result<Void, any Error>) {
        let (entry, attempt, retry) = ledger.withLock { $0.remove(record.id) }
        forget(record)
        attempt?.end()
        retry?.cancel()
        guard let entry else { return }  // a clear, a discard or another process took it already
        if !entry.replacedOnAccept.isEmpty { showAgain(typed(entry.replacedOnAccept)) }  // not confirmed: shown now
        publish()
        entry.completion?(result)
        let outcome: SettledMutation<Input>.Outcome =
            switch result {
            case .success: .accepted
            case .failure(let error as StoreError) where error == .cleared: .cleared
            case .failure(let error): .refused(error)
            }
        let settled = entry.record
        settledNow(
            SettledMutation(
                id: settled.id, input: typedInput(settled.input), outcome: outcome, serverID: settled.serverID))
        pump()
    }

    /// Takes mutation `id` out of the queue and the storage, undoing its change; `nil` when it was not there.
    func takeOut(_ id: String) -> MutationLedger.Entry? {
        guard let entry = drop(id) else { return nil }
        entry.undo?.cancel()
        // A save of its attempt under way lands before it is forgotten.
        ledger.withLock { $0.savesUnderWay }.wait()
        forget(StoredMutation(entry.record))
        return entry
    }

    /// The changes of creation `id`'s key rewritten with the id the server gave, which the store shows as it confirms
    /// the creation, and what the key shows rewritten alike (when the queue knows how); `nil` when there are none.
    private func changesShownOnAccept(of id: String) -> StoreMachine.Replacement? {
        let (shownAgain, created, shownUpTo) = ledger.withLock { $0.takeShownOnAccept(of: id) }
        guard !shownAgain.isEmpty else { return nil }
        let changes = typed(shownAgain).map { shown, input in
            (id: shown.id, change: { [change] value in change(input, value) } as @Sendable (Value?) -> Value?)
        }
        guard let created, let server = created.serverID,
            let temporary = creation?.temporaryID(typedInput(created.input)),
            let rewrite = shownRenaming(temporary, to: server)
        else { return Store<Key, Value>.rewriting(changes, shown: nil) }
        return Store<Key, Value>.rewriting(changes, shown: (rewrite, shownUpTo))
    }

    /// Takes out the mutations naming the item created under `temporary`, whose creation left the queue unaccepted
    /// (and, in turn, those naming the items they create): refused with `refusal`, or discarded when it is `nil`. The
    /// creation itself, `sparing`, settles on its own when it is still in the queue.
    func takeOutNaming(_ temporary: String, because refusal: (any Error)?, sparing creationID: String? = nil) {
        guard let creation else { return }
        var gone = [temporary]
        while let item = gone.popLast() {
            for kept in ledger.withLock({ $0.records(naming: item) }) where kept.id != creationID {
                let record = StoredMutation<Input>(kept)
                guard let entry = takeOut(record.id) else { continue }
                if let created = creation.temporaryID(record.input), created != item { gone.append(created) }
                settleTakenOut(entry, because: refusal)
            }
        }
    }

    /// Tells how a mutation taken out with the creation of an item it names ended.
    private func settleTakenOut(_ entry: MutationLedger.Entry, because refusal: (any Error)?) {
        let record = StoredMutation<Input>(entry.record)
        if let refusal { entry.completion?(.failure(refusal)) }
        let outcome: SettledMutation<Input>.Outcome = refusal.map { .refused($0) } ?? .discarded
        settledNow(SettledMutation(id: record.id, input: record.input, outcome: outcome))
    }

    /// Tells `onSettled`, and the calls sending within a budget, how a mutation ended.
    func settledNow(_ mutation: SettledMutation<Input>) {
        onSettled(mutation)
        tellWaiters(mutation)
        tell(.settled(mutation))
    }

    /// Tells the calls sending within a budget what happened.
    func tell(_ event: SendingWatcher<Input>.Event) {
        for case let watcher as SendingWatcher<Input> in ledger.withLock({ $0.budgetWatchers }) { watcher.tell(event) }
    }

    /// The store no longer waits for mutation `id`'s commit: an attempt in flight is cancelled, and nothing more is
    /// sent for it (the store settles it, or a discard took it out).
    private func commitCancelled(_ id: String) {
        let (attempt, commit) = ledger.withLock { $0.commitCancelled(id) }
        attempt?.end()
        withExtendedLifetime(commit) {}  // released after unlocking
    }

    /// Takes mutation `id` out of the queue, cancelling its attempt in flight, and the wait for its retry when it
    /// was first; `nil` when it was not there.
    func drop(_ id: String) -> MutationLedger.Entry? {
        let (entry, attempt, timer) = ledger.withLock { $0.remove(id) }
        attempt?.end()
        timer?.cancel()
        // A creation taken out before the store confirmed it: the changes named by its server id are shown now.
        if let entry, !entry.replacedOnAccept.isEmpty { showAgain(typed(entry.replacedOnAccept)) }
        if entry != nil { publish() }
        return entry
    }

    /// Changes the ledger kept (their inputs as `any Sendable`), with their inputs of the queue's type again.
    func typed(_ changes: [(shown: ShownChange, input: any Sendable)]) -> [(shown: ShownChange, input: Input)] {
        changes.map { (shown: $0.shown, input: typedInput($0.input)) }
    }

    /// The storage forgets `record`; a failure is told to `onStorageFailure`.
    func forget(_ record: StoredMutation<Input>) {
        do { try storage.remove(record) } catch { onStorageFailure(error) }
    }
}

extension MutationQueue: StoreClearObserver {
    /// A logout begins: nothing more is sent, the attempt in flight is cancelled, and every mutation is taken out of
    /// the queue before the store cancels anything; they leave the storage at once, or, while saves are under way,
    /// once those have landed (a save's file is removed after it is written). The logout's caller never waits for
    /// the storage: `forgotten` ends the queue's part of the clear, on the thread where the last save landed.
    func storeWillClear(forgotten: @escaping @Sendable () -> Void) {
        let taken = ledger.withLock { $0.beginClear() }
        taken.attempt?.token?.cancel()
        taken.retry?.cancel()
        let forgetTaken: @Sendable () -> Void = { [self] in
            for entry in taken.entries { forget(StoredMutation(entry.record)) }
            taken.attempt?.lease?.release()
            ledger.withLock { $0.keepCleared(taken.entries) }
            if !taken.entries.isEmpty { publish() }
            forgotten()
        }
        if taken.saves.wait(timeout: .now()) == .success {
            forgetTaken()
        } else {
            taken.saves.notify(queue: .global(), execute: forgetTaken)
        }
    }

    /// Another process changed `key` in the shared level: the mutations of the key no longer in the shared storage
    /// (another process sent them) are undone here and told, before its value is shown.
    func anotherProcessChanged(_ key: any Hashable & Sendable) {
        guard let isKept, let key = key as? Key else { return }
        let waiting = ledger.withLock { $0.shownAndWaiting }.map(StoredMutation<Input>.init).filter {
            self.key($0.input) == key
        }
        for record in waiting where !isKept(record) {
            guard let (entry, retry) = ledger.withLock({ $0.sentElsewhere(id: record.id) }) else { continue }
            retry?.cancel()
            publish()
            entry.undo?.cancel()
            entry.completion?(.failure(MutationQueueError.sentByAnotherProcess))
            settledNow(SettledMutation(id: record.id, input: record.input, outcome: .sentByAnotherProcess))
        }
        pump()
    }

    /// The logout is over: the mutations it took are told, and what is enqueued from now on is sent. The copies of
    /// entities a mutation showed in the keys of other stores are undone (its own key's change the clear ended).
    func storeDidClear() {
        let cleared = ledger.withLock { $0.endClear() }
        for entry in cleared {
            entry.undo?.cancel()
            entry.completion?(.failure(StoreError.cleared))
            settledNow(SettledMutation(id: entry.record.id, input: typedInput(entry.record.input), outcome: .cleared))
        }
        pump()
    }
}
