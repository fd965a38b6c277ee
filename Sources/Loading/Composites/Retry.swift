extension Loader {
    /// Loads again when a load fails, as `policy` says, waiting on `scheduler` between attempts.
    ///
    /// ```swift
    /// let remote = api.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
    /// ```
    /// The load fails with the last attempt's error when attempts run out, and at once with an error the policy
    /// does not retry.
    public func retry<S: Scheduler>(_ policy: RetryPolicy, scheduler: S) -> RetryLoader<Self> {
        RetryLoader(upstream: self, policy: policy, scheduler: scheduler)
    }

    /// Loads again when a load fails, as `policy` says, waiting on a global dispatch queue between attempts.
    public func retry(_ policy: RetryPolicy) -> RetryLoader<Self> {
        retry(policy, scheduler: .global())
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
        attempt(1, pending)
        return pending
    }

    private func attempt(_ number: Int, _ pending: PendingLoad<Upstream.Output>) {
        pending.startStep {
            upstream.load { [self] result in
                guard case .failure(let error) = result, number < policy.maxAttempts, policy.shouldRetry(error) else {
                    return pending.complete(result)
                }
                let delay = policy.backoff.delay(beforeRetry: number)
                if delay <= .zero {
                    attempt(number + 1, pending)
                } else {
                    pending.startStep {
                        scheduler.schedule(after: delay) { [self] in attempt(number + 1, pending) }
                    }
                }
            }
        }
    }
}
