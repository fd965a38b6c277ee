import Dispatch

/// A scheduler that runs work asynchronously on a dispatch queue.
///
/// ```swift
/// let saved = loader.receive(on: .queue(DispatchQueue(label: "saves")))
/// ```
public struct DispatchQueueScheduler: Scheduler {
    private let queue: DispatchQueue

    fileprivate init(queue: DispatchQueue) {
        self.queue = queue
    }

    public var now: Duration {
        DispatchTime.now().duration
    }

    public func schedule(_ action: @escaping @Sendable () -> Void) {
        queue.async(execute: action)
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        let scheduled = ScheduledAction(action)
        queue.asyncAfter(deadline: .now() + delay.dispatchInterval) { scheduled.run() }
        return scheduled
    }
}

extension Scheduler where Self == DispatchQueueScheduler {
    /// A scheduler on `queue`.
    public static func queue(_ queue: DispatchQueue) -> DispatchQueueScheduler {
        DispatchQueueScheduler(queue: queue)
    }

    /// A scheduler on the global concurrent queue of the given quality of service.
    public static func global(qos: DispatchQoS.QoSClass = .default) -> DispatchQueueScheduler {
        DispatchQueueScheduler(queue: .global(qos: qos))
    }
}
