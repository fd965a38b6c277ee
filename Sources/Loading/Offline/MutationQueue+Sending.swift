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
        let start = ledger.withLock { $0.beginAttempt(byBudget: byBudget) }
        guard case .attempt(let record, let serial, let saves) = start else {
            if case .heldForBudget = start { tell(.changed) }
            return false
        }
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
        let token = send(record.input, record.id).load { [self] result in answered(record, serial, result) }
        // Not kept when it was answered already, or cancelled meanwhile.
        if !ledger.withLock({ $0.keepToken(token, of: serial) }) { token.cancel() }
        return true
    }

    /// The server answered attempt `serial` of `record`; an answer of an attempt that was cancelled (a logout, a
    /// discard) changes nothing.
    private func answered(_ record: StoredMutation<Input>, _ serial: Int, _ result: Result<Void, any Error>) {
        switch result {
        case .success:
            settle(record, serial, with: .success(()))
        case .failure(let error) where isRefused(error):
            settle(record, serial, with: .failure(error))
        case .failure(let error):
            waitToRetry(record, serial, after: error)
        }
        pump()
    }

    /// Completes the store's commit of `record` with the server's answer (the store then settles it). The storage
    /// forgets it at once, before the attempt's lease is released: another process never sends it again.
    private func settle(_ record: StoredMutation<Input>, _ serial: Int, with answer: Result<Void, any Error>) {
        guard let (attempt, commit) = ledger.withLock({ $0.answer(serial) }) else { return }
        forget(record)
        attempt.lease?.release()
        commit?(answer)
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
    }
}
