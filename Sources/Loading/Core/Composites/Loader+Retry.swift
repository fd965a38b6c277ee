extension Loader {
    /// Loads again when a load fails, as `policy` says, waiting on `scheduler` between attempts: by default a
    /// ``TaskScheduler``, which keeps the task-local values of the code that started the load.
    ///
    /// ```swift
    /// let remote = api.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
    /// let live = updates.retry(.constant(.seconds(1), maxAttempts: .max), scheduler: .global())
    /// ```
    /// The load fails with the last attempt's error when attempts run out, and at once with an error the policy
    /// does not retry. Attempts that fail synchronously are retried in a loop, in constant stack depth, however many
    /// there are.
    public func retry<S: Scheduler>(
        _ policy: RetryPolicy, scheduler: S = TaskScheduler<ContinuousClock>.task
    ) -> RetryLoader<Self> {
        RetryLoader(upstream: self, policy: policy, scheduler: scheduler)
    }
}

/// A loader that retries its upstream on failure. See ``Loader/retry(_:scheduler:)``.
///
/// Delivers on the thread of the last attempt. Cancelling cancels the attempt in flight or the pending delay, and
/// no attempt starts afterwards.
public final class RetryLoader<Upstream: Loader>: Loader {
    let upstream: Upstream
    let policy: RetryPolicy
    let scheduler: any Scheduler

    init(upstream: Upstream, policy: RetryPolicy, scheduler: any Scheduler) {
        self.upstream = upstream
        self.policy = policy
        self.scheduler = scheduler
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        attempt(1, pending, Trampoline())
        return pending
    }

    /// Starts attempt `number`. A failure that is retried at once goes through `trampoline`, so that synchronous
    /// failures loop instead of nesting one call per attempt.
    private func attempt(_ number: Int, _ pending: PendingLoad<Upstream.Output>, _ trampoline: Trampoline) {
        let started = policy.resetInterval == nil ? .zero : scheduler.now
        pending.startStep {
            upstream.load { [self] result in
                guard case .failure(let error) = result else { return pending.complete(result) }
                let number =
                    policy.resetInterval == nil
                    ? number : policy.attemptNumber(number, startedAt: started, failedAt: scheduler.now)
                guard policy.allowsRetry(after: number, error: error) else { return pending.complete(result) }
                let next: @Sendable () -> Void = { [self] in
                    attempt(number < .max ? number + 1 : number, pending, trampoline)
                }
                let delay = policy.delay(beforeRetry: number, after: error)
                policy.retryObserver?(number, delay, error)
                if delay <= .zero {
                    trampoline.run(next)
                } else {
                    pending.startStep { scheduler.schedule(after: delay) { trampoline.run(next) } }
                }
            }
        }
    }
}
