/// A scheduler that runs work at once, on the calling thread, ignoring delays.
///
/// Useful where an API asks for a scheduler and you want no hop and no wait (for example `retry` without delays in
/// a synchronous test). `now` is always zero.
public struct ImmediateScheduler: Scheduler {
    /// Creates an immediate scheduler.
    init() {}

    public var now: Duration { .zero }

    public func schedule(_ action: @escaping @Sendable () -> Void) {
        action()
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        action()
        return FinishedToken()
    }
}

extension Scheduler where Self == ImmediateScheduler {
    /// A scheduler that runs work at once on the calling thread.
    public static var immediate: ImmediateScheduler { ImmediateScheduler() }
}
