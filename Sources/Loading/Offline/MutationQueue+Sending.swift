import Dispatch

// Sending: one attempt at a time, of the first mutation, its answer settling it or waiting for a retry.
extension MutationQueue {
    /// Sends the first mutation when nothing is being sent, no retry is waited for, no clear is under way, and the
    /// network allows; in constant stack depth when attempts answer at once. While calls send within a budget, they
    /// start the attempts, and are told instead.
    func pump() {
        trampoline.run { [self] in _ = sendFirst() }
    }

    /// Starts an attempt of the first mutation when it can; whether it started one. `byBudget`: asked by a call of
    /// ``sendPending(within:clock:)``, which alone starts attempts while it runs.
    func sendFirst(byBudget: Bool = false) -> Bool {
        guard connectivity?.isOnline ?? true else { return false }
        // Another process's logout recorded before now comes first: the old user's mutations are not sent.
        store.learnOtherProcessesChanges()
        let start = ledger.withLock { $0.beginAttempt(byBudget: byBudget) }
        guard case .attempt(let kept, let serial, let saves) = start else {
            if case .heldForBudget = start { tell(.changed) }
            return false
        }
        let record = StoredMutation<Input>(kept)
        let lease: MutationSendingLease?
        do {
            switch try claim?(record) ?? .claimed(nil) {
            case .claimed(let claimed): lease = claimed
            case .busy:
                saves.leave()
                anotherProcessSends(serial)
                return false
            case .gone:
                saves.leave()
                sentElsewhere(record, serial)
                return false
            }
        } catch {
            // The storage cannot say: sent as if this process were alone.
            onStorageFailure(error)
            lease = nil
        }
        var attempted = record
        attempted.attempts += 1
        do { try storage.save(attempted) } catch { onStorageFailure(error) }
        saves.leave()
        guard ledger.withLock({ $0.recordAttempt(serial, attempts: attempted.attempts, lease: lease) }) else {
            lease?.release()
            return false
        }
        publish()
        let token: any CancellationToken
        if let creation, creation.temporaryID(record.input) != nil {
            token = sendCreation(record, with: creation) { [self] result in answered(record, serial, result) }
        } else {
            token = send(record.input, record.idempotencyKey).load { [self] result in
                answered(record, serial, result.map { nil })
            }
        }
        // Not kept when it was answered already, or cancelled meanwhile.
        if !ledger.withLock({ $0.keepToken(token, of: serial) }) { token.cancel() }
        return true
    }

    /// Sends creation `record`, whose success is the item's server id. A creation the server answered before a kill
    /// is not sent again: its answer is the id it kept.
    private func sendCreation(
        _ record: StoredMutation<Input>, with creation: OfflineCreation<Input>,
        answer: @escaping @Sendable (Result<String?, any Error>) -> Void
    ) -> any CancellationToken {
        guard let serverID = record.serverID else {
            return creation.send(record.input, record.idempotencyKey).load { result in answer(result.map { $0 }) }
        }
        answer(.success(serverID))
        return FinishedToken()
    }

    /// The server answered attempt `serial` of `record`; an answer of an attempt that was cancelled (a logout, a
    /// discard) changes nothing.
    private func answered(_ record: StoredMutation<Input>, _ serial: Int, _ result: Result<String?, any Error>) {
        let temporary = creation?.temporaryID(record.input)
        switch result {
        case .success(let serverID):
            if let temporary, let serverID, !assign(serverID, to: temporary, created: record, serial) { break }
            ledger.withLock { $0.accept(serial) }?(.success(()))
        case .failure(let error):
            // A conflict first: the app's `isRefused` may take the server's answer for a refusal too.
            if conflicted(record, serial, error) { break }
            guard isRefused(error) else {
                waitToRetry(record, serial, after: error)
                break
            }
            refuse(record, serial, because: error, creating: temporary)
        }
        pump()
    }

    /// The server created the item of `created` (attempt `serial`) as `serverID`: the id is saved with the creation
    /// first (a kill from then on does not send it again), then written into every mutation after it that names
    /// the item, in the storage and in the store, and into the creation as the store confirms it. `false` when the
    /// attempt was taken back meanwhile (a logout, a discard).
    private func assign(
        _ serverID: String, to temporary: String, created: StoredMutation<Input>, _ serial: Int
    ) -> Bool {
        // Read before the id is known: a change the store shows with a greater number may name it already.
        let shownUpTo = store.changesMade
        guard let creation,
            let (entry, later, saves) = ledger.withLock({ $0.beginAssigning(serverID, to: temporary, serial: serial) })
        else { return false }
        defer { saves.leave() }  // a clear or a discard removes files only once these saves landed
        if created.serverID == nil {
            do { try storage.save(StoredMutation<Input>(entry.record)) } catch { onStorageFailure(error) }
        }
        let inputs = later.compactMap { record in
            creation.replacing(temporary, with: serverID, in: typedInput(record.input)).map {
                (id: record.id, input: $0 as any Sendable)
            }
        }
        let rewritten = ledger.withLock { $0.rewrite(inputs, replacing: temporary, with: serverID) }
        var shownAgain: [(shown: ShownChange, input: Input)] = []
        for (kept, shown) in rewritten {
            let record = StoredMutation<Input>(kept)
            do { try storage.save(record) } catch { onStorageFailure(error) }
            if let shown { shownAgain.append((shown, record.input)) }
        }
        let renaming = (temporary: temporary, server: serverID, shownUpTo: shownUpTo)
        guard let shown = entry.shown, let confirmed = creation.replacing(temporary, with: serverID, in: created.input)
        else {
            showAgain(shownAgain, renaming: renaming)
            return true
        }
        // The creation's key shows the server's id once, as the store confirms the creation; other keys at once.
        shownAgain.append((shown, confirmed))
        let creationKey = shown.key as? Key
        let onAccept = shownAgain.filter { $0.shown.key as? Key == creationKey }
        showAgain(shownAgain.filter { $0.shown.key as? Key != creationKey }, renaming: renaming)
        let kept = onAccept.map { (shown: $0.shown, input: $0.input as any Sendable) }
        ledger.withLock { $0.showOnAccept(kept, shownUpTo: shownUpTo, of: entry.record.id) }
        return true
    }

    /// Shows mutations' changes again with their inputs rewritten, each key's at once. With `renaming` (the id the
    /// server gave an item, written into them, and the store's changes made before it was known) and
    /// ``replacingIDsInValue``, each key shows what it showed with the id replaced, rather than its changes applied
    /// again.
    func showAgain(
        _ changes: [(shown: ShownChange, input: Input)],
        renaming: (temporary: String, server: String, shownUpTo: Int)? = nil
    ) {
        var byKey: [Key: [(id: Int, change: @Sendable (Value?) -> Value?)]] = [:]
        for (shown, input) in changes {
            guard let key = shown.key as? Key else { preconditionFailure("A queue's change is shown under its key") }
            byKey[key, default: []].append((shown.id, { [change] value in change(input, value) }))
        }
        let shown = renaming.flatMap { renaming in
            shownRenaming(renaming.temporary, to: renaming.server).map { ($0, renaming.shownUpTo) }
        }
        for (key, changes) in byKey {
            store.replaceChanges(Store<Key, Value>.rewriting(changes, shown: shown), of: key)
        }
    }

    /// What a key shows with the item created as `temporary` under its server id `server`, when the queue was told
    /// how (``replacingIDsInValue``).
    func shownRenaming(_ temporary: String, to server: String) -> (@Sendable (Value?) -> Value?)? {
        guard let replacingIDsInValue else { return nil }
        return { value in value.map { replacingIDsInValue($0) { $0 == temporary ? server : nil } } }
    }

    /// Completes the store's commit of `record` with the server's refusal (the store then undoes it). The storage
    /// forgets it at once, before the attempt's lease is released: another process never sends it again. Nothing
    /// when the attempt was taken back meanwhile. (An accepted mutation's attempt runs on until the store saved it:
    /// see ``settled(_:_:)``.) A creation (of the item `temporary` names) takes the mutations naming its item out
    /// first: its settling sends the next mutation.
    private func refuse(
        _ record: StoredMutation<Input>, _ serial: Int, because error: any Error, creating temporary: String? = nil
    ) {
        guard let (attempt, commit) = ledger.withLock({ $0.answer(serial) }) else { return }
        forget(record)
        attempt.lease?.release()
        if let temporary {
            takeOutNaming(
                temporary, because: MutationQueueError.creationRefused(temporaryID: temporary), sparing: record.id)
        }
        commit?(.failure(error))
    }

    /// Keeps `record` first after a transient failure, and sends it again later.
    private func waitToRetry(_ record: StoredMutation<Input>, _ serial: Int, after error: any Error) {
        guard let (attempt, attempts) = ledger.withLock({ $0.failForNow(serial, with: error) }) else { return }
        attempt.lease?.release()
        publish()
        tell(.failedForNow(error))
        scheduleRetry(after: retryDelays.delay(beforeRetry: attempts))
    }

    /// Another process sends from the storage now: this one tries again a moment later.
    private func anotherProcessSends(_ serial: Int) {
        guard ledger.withLock({ $0.yieldToAnotherProcess(serial) }) else { return }
        tell(.busy)
        scheduleRetry(after: .milliseconds(200))
    }

    /// Another process sent `record` already (the storage no longer keeps it): it is undone here, and its key is
    /// invalidated so that what the server holds now is fetched.
    private func sentElsewhere(_ record: StoredMutation<Input>, _ serial: Int) {
        guard let entry = ledger.withLock({ $0.sentElsewhere(serial) }) else { return pump() }
        publish()
        entry.undo?.cancel()
        store.invalidate(key(record.input))
        entry.completion?(.failure(MutationQueueError.sentByAnotherProcess))
        settledNow(SettledMutation(id: record.id, input: record.input, outcome: .sentByAnotherProcess))
        pump()
    }

    func scheduleRetry(after delay: Duration) {
        let timer = scheduler.schedule(after: delay) { [weak self] in
            self?.retryDue()
        }
        // Not kept when the network came back meanwhile.
        if !ledger.withLock({ $0.keepRetry(timer) }) { timer.cancel() }
    }

    private func retryDue() {
        // The timer that called is over: released after unlocking.
        withExtendedLifetime(ledger.withLock { $0.endWaitToRetry() }) {}
        pump()
    }

    func networkCameBack() {
        ledger.withLock { $0.endWaitToRetry() }?.cancel()
        pump()
    }

    /// Tells the observers of ``pendingMutations`` that the list changed, unless a newer change was told already.
    func publish() {
        let version = ledger.withLock { $0.nextVersion() }
        versions.update { current in current < version ? version : nil }
        wakeIfSettled()
    }
}
