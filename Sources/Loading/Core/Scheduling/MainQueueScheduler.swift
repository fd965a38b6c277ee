import Dispatch

/// A scheduler on the main queue that runs work **inline** when it is asked from the main queue and nothing it
/// scheduled earlier is still waiting, and asynchronously otherwise, so that order is always kept.
///
/// This spares a screen the one-frame flash of a loading state when the value is already at hand (a memory hit on
/// the main thread is delivered before `load` returns), while work from other threads still hops to main.
///
/// In a command-line program the main queue only runs while the program runs it (`dispatchMain()`, a `RunLoop`,
/// or top-level `await`).
public struct MainQueueScheduler: Scheduler {

    private static let key = DispatchSpecificKey<UInt8>()
    private static let pending = Locked(0)
    private static let marked: Bool = {
        DispatchQueue.main.setSpecific(key: key, value: 1)
        return true
    }()

    fileprivate init() {}

    /// Whether the calling code runs on the main queue.
    package static var isOnMainQueue: Bool {
        _ = marked
        return DispatchQueue.getSpecific(key: key) != nil
    }

    public var now: Duration {
        DispatchTime.now().duration
    }

    public func schedule(_ action: @escaping @Sendable () -> Void) {
        if Self.isOnMainQueue {
            let runInline = Self.pending.withLock { pending in
                guard pending == 0 else { return false }
                return true
            }
            if runInline { return action() }
        }
        Self.pending.withLock { $0 += 1 }
        DispatchQueue.main.async {
            Self.pending.withLock { $0 -= 1 }
            action()
        }
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        let scheduled = ScheduledAction(action)
        DispatchQueue.main.asyncAfter(deadline: .now() + delay.dispatchInterval) { scheduled.run() }
        return scheduled
    }
}

extension Scheduler where Self == MainQueueScheduler {
    /// The main queue, running work inline when already on it with nothing queued ahead.
    public static var main: MainQueueScheduler { MainQueueScheduler() }
}
