extension EventStream {
    /// Subscribes to this stream again, up to `retries` more times (`.max`: for ever), at once.
    func retry(_ retries: Int) -> EventStream {
        let attempts = retries >= RetryPolicy.unlimited - 1 ? RetryPolicy.unlimited : max(retries, 0) + 1
        return retry(.immediate(maxAttempts: attempts), scheduler: .immediate)
    }

    /// Subscribes to this stream again when it fails, as `policy` says (attempts, backoff, which errors), waiting
    /// on `scheduler` between attempts (by default a ``TaskScheduler``); values of failed attempts have already been
    /// delivered.
    ///
    /// ```swift
    /// let friends = EventStream.deferred { api.friends().asStream() }.retry(.immediate(maxAttempts: 3))
    /// ```
    ///
    /// ```swift
    /// let live = liveEvents.retry(
    ///     .exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: .max)
    ///         .resettingAttempts(after: .seconds(10)),
    ///     scheduler: .global())
    /// ```
    /// Attempts that fail synchronously are resubscribed in a loop, in constant stack depth, however many there are.
    /// Retrying re-runs the stream's subscription. A bare ``future(_:)`` does its work once, so retrying it only
    /// replays its failure: wrap it in ``deferred(_:)`` (or use ``task(priority:_:)``) to retry the work itself.
    public func retry<S: Scheduler>(
        _ policy: RetryPolicy, scheduler: S = TaskScheduler<ContinuousClock>.task
    ) -> EventStream {
        EventStream { observer in
            attempt(1, policy: policy, scheduler: scheduler, observer: observer, trampoline: Trampoline())
        }
    }

    private func attempt<S: Scheduler>(
        _ number: Int,
        policy: RetryPolicy,
        scheduler: S,
        observer: StreamObserver<Output, Failure>,
        trampoline: Trampoline
    ) {
        let upstream = observer.lifetime.makeChild()
        let started = policy.resetInterval == nil ? .zero : scheduler.now
        subscribe(
            StreamObserver(lifetime: upstream) { event in
                guard case .completion(.failure(let error)) = event else {
                    if event.isCompletion { upstream.end() }
                    return observer.receive(event)
                }
                let number =
                    policy.resetInterval == nil
                    ? number : policy.attemptNumber(number, startedAt: started, failedAt: scheduler.now)
                guard policy.allowsRetry(after: number, error: error) else {
                    upstream.end()
                    return observer.receive(event)
                }
                guard upstream.end(), observer.lifetime.isActive else { return }
                let next: @Sendable () -> Void = {
                    attempt(
                        number < .max ? number + 1 : number, policy: policy, scheduler: scheduler,
                        observer: observer, trampoline: trampoline)
                }
                let delay = policy.delay(beforeRetry: number, after: error)
                policy.retryObserver?(number, delay, error)
                guard delay > .zero else { return trampoline.run(next) }
                // A child lifetime for the wait, so that a cancel stops the timer and a fired timer leaves nothing
                // behind on the subscription.
                let waiting = observer.lifetime.makeChild()
                let timer = scheduler.schedule(after: delay) {
                    guard waiting.end() else { return }
                    trampoline.run(next)
                }
                waiting.onEnd { timer.cancel() }
            })
    }
}
