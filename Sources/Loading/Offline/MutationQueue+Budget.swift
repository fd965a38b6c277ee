// Sending within a budget: what a background task calls with the time it was given.
extension MutationQueue {
    /// Sends the pending mutations, oldest first and one at a time as always, until none is left, `budget` has
    /// passed on `clock` (by default `ContinuousClock`), the calling task is cancelled (which cancels the attempt in
    /// flight: its mutation stays first), a transient failure or the network stops it, or another process sends from
    /// the storage; then returns what happened. A mutation waiting for its retry is sent at once. What a background
    /// task calls with the time it was given:
    ///
    /// ```swift
    /// let sending = Task { await outbox.sendPending(within: .seconds(25)) }
    /// task.expirationHandler = { sending.cancel() }  // the system wants the time back: stop
    /// let report = await sending.value
    /// task.setTaskCompleted(success: report.failure == nil)
    /// ```
    ///
    /// While it runs, the queue starts nothing on its own: no attempt starts once the deadline has passed, and one
    /// started before runs to its end. When it stops with mutations left, the queue waits its first retry delay
    /// before it sends on its own again (or until the network comes back): in a background task, the system
    /// suspends the app once it is told the task is complete.
    public func sendPending<C: Clock>(
        within budget: C.Duration, clock: C = ContinuousClock()
    ) async -> MutationSendingReport<Input> {
        let deadline = clock.now.advanced(by: budget)
        let watcher = SendingWatcher<Input>()
        ledger.withLock { $0.beginBudget(watcher) }
        var report = MutationSendingReport<Input>()
        await withTaskCancellationHandler {
            var stops = false
            while !stops, !Task.isCancelled, clock.now < deadline, connectivity?.isOnline ?? true {
                guard let starts = nextStepWithinBudget() else { break }
                if starts, !sendFirst(byBudget: true), !(connectivity?.isOnline ?? true) { break }
                if Task.isCancelled { cancelAttempt() }  // cancelled as the attempt started
                for event in await watcher.next() {
                    switch event {
                    case .settled(let mutation): report.settled.append(mutation)
                    case .failedForNow(let error):
                        report.failure = error
                        stops = true
                    case .busy: stops = true
                    case .changed: break
                    }
                }
            }
        } onCancel: {
            cancelAttempt()
        }
        let isOnline = connectivity?.isOnline ?? true
        let (remaining, waits) = ledger.withLock { $0.endBudget(watcher, isOnline: isOnline) }
        report.remaining = remaining.map(PendingMutation.init)
        if waits { scheduleRetry(after: retryDelays.delay(beforeRetry: 1)) } else { pump() }
        return report
    }

    /// For a call sending within a budget: `nil` when no mutation is left, `true` when it starts the first (a retry
    /// waited for is not waited for any more), `false` when an attempt runs already.
    private func nextStepWithinBudget() -> Bool? {
        let (step, timer) = ledger.withLock { $0.nextStepWithinBudget() }
        timer?.cancel()
        return step
    }

    /// Cancels the attempt in flight (its mutation stays first, waiting), for a call sending within a budget whose
    /// task was cancelled.
    private func cancelAttempt() {
        if let attempt = ledger.withLock({ $0.takeBackAttempt() }) {
            attempt.end()
            publish()
        }
        tell(.changed)
    }
}
