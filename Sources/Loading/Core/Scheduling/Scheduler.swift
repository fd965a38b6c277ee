import Dispatch

/// Where and when work runs: a dispatch queue, the main queue, the current thread, or virtual time in tests.
///
/// Composites that wait (retry delays, timeouts, debounce) or hop threads (`receive(on:)`) take a scheduler, so
/// that tests drive time with `TestScheduler` from `LoadingTestSupport` instead of sleeping.
public protocol Scheduler: Sendable {
    /// The scheduler's current time, measured from an arbitrary origin that is fixed for the scheduler.
    var now: Duration { get }

    /// Runs `action` as soon as the scheduler can.
    func schedule(_ action: @escaping @Sendable () -> Void)

    /// Runs `action` once `delay` has passed, unless the returned token is cancelled first.
    ///
    /// Once `cancel()` returns, `action` does not start.
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken
}

/// An action that runs at most once, and never after its token is cancelled.
final class ScheduledAction: CancellationToken {
    private let action: Locked<(@Sendable () -> Void)?>

    init(_ action: @escaping @Sendable () -> Void) {
        self.action = Locked(action)
    }

    func run() {
        let action = self.action.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    func cancel() {
        let dropped = action.withLock { action in
            defer { action = nil }
            return action
        }
        withExtendedLifetime(dropped) {}  // released after unlocking: its captures' deinits may call back
    }
}

extension Duration {
    /// The duration as a `DispatchTimeInterval`, rounded to whole nanoseconds and clamped at zero.
    var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 || seconds > 0 else { return .nanoseconds(0) }
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !nanoseconds.overflow, nanoseconds.partialValue < Int64(Int.max) else { return .never }
        return .nanoseconds(Int(nanoseconds.partialValue + attoseconds / 1_000_000_000))
    }

    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration in nanoseconds, for arithmetic such as backoff.
    var nanoseconds: Double {
        Double(components.seconds) * 1e9 + Double(components.attoseconds) / 1e9
    }
}

extension DispatchTime {
    var duration: Duration {
        .nanoseconds(uptimeNanoseconds)
    }
}
