extension Loader {
    /// Delivers the result on `scheduler`.
    ///
    /// ```swift
    /// let saves = database.receive(on: .queue(saveQueue))
    /// ```
    /// Cancelling cancels the upstream load and drops a result already on its way to the scheduler.
    @inlinable
    public func receive<S: Scheduler>(on scheduler: S) -> ReceiveOnLoader<Self, S> {
        ReceiveOnLoader(upstream: self, scheduler: scheduler)
    }

    /// Delivers the result on the main queue: inline when the result arrives on the main queue with nothing queued
    /// ahead of it, otherwise asynchronously. See ``MainQueueScheduler``.
    ///
    /// ```swift
    /// friends.dispatchOnMainQueue().load { result in render(result) }
    /// ```
    @inlinable
    public func dispatchOnMainQueue() -> ReceiveOnLoader<Self, MainQueueScheduler> {
        receive(on: .main)
    }
}

/// A loader that delivers its upstream's result on a scheduler. See ``Loader/receive(on:)``.
public struct ReceiveOnLoader<Upstream: Loader, S: Scheduler>: Loader {
    /// Starts a load: made in `init`, so compiled where the loader is built, for its types. It captures what the
    /// loader holds (a struct has no reference of its own to hand it).
    @usableFromInline let start: @Sendable (@escaping LoadCompletion<Upstream.Output>) -> any CancellationToken

    @inlinable
    init(upstream: Upstream, scheduler: S) {
        start = { completion in
            let pending = PendingLoad(completion)
            pending.startFirstStep {
                upstream.load { result in
                    scheduler.schedule { pending.complete(result) }
                }
            }
            return pending
        }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        start(completion)
    }
}
