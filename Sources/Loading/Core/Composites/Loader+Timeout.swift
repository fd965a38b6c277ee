/// The error of a load that took longer than its ``Loader/timeout(after:scheduler:)`` allowed.
public struct TimeoutError: Error, Equatable, CustomStringConvertible {
    /// The time the load was allowed.
    public let interval: Duration

    /// Creates the error for a load that was allowed `interval`.
    public init(interval: Duration) {
        self.interval = interval
    }

    public var description: String {
        "The load did not finish within \(interval)."
    }
}

extension Loader {
    /// Fails with ``TimeoutError`` and cancels the load when it has not finished after `interval` on `scheduler`: by
    /// default a ``TaskScheduler`` (as for ``retry(_:scheduler:)``), which keeps the task-local values of the code
    /// that started the load.
    ///
    /// ```swift
    /// let remote = AnyLoader { try await api.friends() }.timeout(after: .seconds(10))
    /// let polled = remote.timeout(after: .seconds(30), scheduler: .global())
    /// ```
    public func timeout<S: Scheduler>(
        after interval: Duration, scheduler: S = TaskScheduler<ContinuousClock>.task
    ) -> TimeoutLoader<Self, S> {
        TimeoutLoader(upstream: self, interval: interval, scheduler: scheduler)
    }
}

/// A loader that fails its upstream after a time limit. See ``Loader/timeout(after:scheduler:)``.
///
/// Delivers on the upstream's thread, or on the scheduler's when the time runs out. Cancelling cancels both the
/// load and the timer.
public struct TimeoutLoader<Upstream: Loader, S: Scheduler>: Loader {
    let upstream: Upstream
    let interval: Duration
    let scheduler: S

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        let interval = self.interval
        let pending = PendingLoad(completion)
        let timer = scheduler.schedule(after: interval) {
            pending.completeCancellingStep(.failure(TimeoutError(interval: interval)))
        }
        pending.startStep {
            upstream.load { result in
                timer.cancel()
                pending.complete(result)
            }
        }
        return AnyCancellationToken {
            timer.cancel()
            pending.cancel()
        }
    }
}
