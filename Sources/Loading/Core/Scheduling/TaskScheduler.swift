/// A scheduler built on Swift concurrency: each action runs in a new `Task`, after `Task.sleep` on a `Clock` when it
/// has a delay. The choice for loaders and streams driven from async code.
///
/// A `Task` created by code that runs inside a task inherits that task's task-local values, so an action scheduled
/// from async code (a retry delay, a timeout) still sees the request id, tracing span or logger metadata that the
/// code which started the load had bound:
/// ```swift
/// let upstream = AnyLoader { try await client.quote() }
///     .timeout(after: .seconds(2), scheduler: .task)
///     .retry(.exponential(initial: .milliseconds(100), maxAttempts: 3), scheduler: .task)
/// let quote = try await RequestID.$current.withValue("req-42") { try await upstream.load() }  // every attempt sees it
/// ```
/// Once the token of a delayed action is cancelled, the action does not start (its `Task` is cancelled too).
public struct TaskScheduler<C: Clock>: Scheduler where C.Duration == Duration {
    private let clock: C
    private let priority: TaskPriority?
    private let origin: C.Instant

    /// Creates a scheduler on `clock`, running actions in tasks of `priority`.
    public init(clock: C, priority: TaskPriority? = nil) {
        self.clock = clock
        self.priority = priority
        origin = clock.now
    }

    public var now: Duration {
        origin.duration(to: clock.now)
    }

    public func schedule(_ action: @escaping @Sendable () -> Void) {
        Task(priority: priority) { action() }
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        let scheduled = ScheduledAction(action)
        let deadline = clock.now.advanced(by: max(delay, .zero))
        let task = Task(priority: priority) { [clock] in
            try? await clock.sleep(until: deadline, tolerance: nil)
            scheduled.run()
        }
        return AnyCancellationToken {
            scheduled.cancel()
            task.cancel()
        }
    }
}

extension TaskScheduler where C == ContinuousClock {
    /// Creates a scheduler on the continuous clock, running actions in tasks of `priority`.
    init(priority: TaskPriority? = nil) {
        self.init(clock: ContinuousClock(), priority: priority)
    }
}

extension Scheduler where Self == TaskScheduler<ContinuousClock> {
    /// A scheduler on Swift concurrency and the continuous clock, whose actions keep the task-local values of the
    /// code that scheduled them.
    public static var task: TaskScheduler<ContinuousClock> { TaskScheduler() }
}
