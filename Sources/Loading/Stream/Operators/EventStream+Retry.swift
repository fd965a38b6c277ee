extension EventStream {
    /// Subscribes to this stream again, up to `retries` more times, when it fails; values of failed attempts have
    /// already been delivered.
    ///
    /// ```swift
    /// EventStream.deferred { api.friends() }.retry(2)
    /// ```
    /// Retrying re-runs the stream's subscription. A bare ``future(_:)`` does its work once, so retrying it only
    /// replays its failure: wrap it in ``deferred(_:)`` (or use ``task(priority:_:)``) to retry the work itself.
    public func retry(_ retries: Int) -> EventStream {
        retry(.immediate(maxAttempts: retries + 1), scheduler: .immediate)
    }

    /// Subscribes to this stream again when it fails, as `policy` says (attempts, backoff, which errors), waiting
    /// on `scheduler` between attempts.
    ///
    /// ```swift
    /// liveEvents.retry(.exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: .max),
    ///                  scheduler: .global())
    /// ```
    public func retry<S: Scheduler>(_ policy: RetryPolicy, scheduler: S) -> EventStream {
        EventStream { observer in
            attempt(1, policy: policy, scheduler: scheduler, observer: observer)
        }
    }

    private func attempt<S: Scheduler>(
        _ number: Int,
        policy: RetryPolicy,
        scheduler: S,
        observer: StreamObserver<Output, Failure>
    ) {
        let upstream = observer.lifetime.makeChild()
        subscribe(
            StreamObserver(lifetime: upstream) { event in
                guard case .completion(.failure(let error)) = event, number < policy.maxAttempts,
                    policy.shouldRetry(error)
                else {
                    if event.isCompletion { upstream.end() }
                    return observer.receive(event)
                }
                guard upstream.end(), observer.lifetime.isActive else { return }
                let delay = policy.backoff.delay(beforeRetry: number)
                if delay <= .zero {
                    attempt(number + 1, policy: policy, scheduler: scheduler, observer: observer)
                } else {
                    // A child lifetime for the wait, so that a cancel stops the timer and a fired timer leaves
                    // nothing behind on the subscription.
                    let waiting = observer.lifetime.makeChild()
                    let timer = scheduler.schedule(after: delay) {
                        guard waiting.end() else { return }
                        attempt(number + 1, policy: policy, scheduler: scheduler, observer: observer)
                    }
                    waiting.onEnd { timer.cancel() }
                }
            })
    }
}
