/// How many times a failed load is tried, how long to wait between tries, and which errors are worth a retry.
///
/// ```swift
/// remote.retry(.exponential(initial: .milliseconds(200), maxDelay: .seconds(5), maxAttempts: 4))
/// remote.retry(.constant(.seconds(1), maxAttempts: 3).retrying { $0 is URLError })
/// ```
public struct RetryPolicy: Sendable {
    /// The total number of attempts, the first included (at least 1).
    public var maxAttempts: Int
    /// The delay before each retry.
    public var backoff: Backoff
    /// Whether an error is worth another attempt; the load fails at once with errors it rejects.
    public var shouldRetry: @Sendable (any Error) -> Bool

    /// Creates a policy; `maxAttempts` below 1 is treated as 1.
    public init(
        maxAttempts: Int,
        backoff: Backoff = .none,
        shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.backoff = backoff
        self.shouldRetry = shouldRetry
    }

    /// Retries at once, without waiting.
    public static func immediate(maxAttempts: Int) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts)
    }

    /// Waits `delay` before each retry.
    public static func constant(_ delay: Duration, maxAttempts: Int) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, backoff: .constant(delay))
    }

    /// Waits `initial` before the first retry, then `multiplier` times longer each time, never more than `maxDelay`,
    /// shortened at random by up to `jitter` (0...1) of the delay so that many clients do not retry in step.
    public static func exponential(
        initial: Duration,
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(60),
        jitter: Double = 0,
        maxAttempts: Int
    ) -> RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts,
            backoff: .exponential(initial: initial, multiplier: multiplier, maxDelay: maxDelay, jitter: jitter))
    }

    /// A copy that retries only the errors `predicate` accepts.
    public func retrying(if predicate: @escaping @Sendable (any Error) -> Bool) -> RetryPolicy {
        var policy = self
        policy.shouldRetry = predicate
        return policy
    }
}

/// The delay before each retry of a ``RetryPolicy``.
public struct Backoff: Sendable {
    private let delayForRetry: @Sendable (_ retry: Int) -> Duration

    /// Creates a backoff from a function of the retry's number (1 for the first retry).
    public init(_ delayForRetry: @escaping @Sendable (_ retry: Int) -> Duration) {
        self.delayForRetry = delayForRetry
    }

    /// The delay before retry number `retry` (1 for the first retry).
    public func delay(beforeRetry retry: Int) -> Duration {
        delayForRetry(retry)
    }

    /// No delay.
    public static let none = Backoff { _ in .zero }

    /// The same delay before every retry.
    public static func constant(_ delay: Duration) -> Backoff {
        Backoff { _ in delay }
    }

    /// `initial`, then `multiplier` times longer before each further retry, capped at `maxDelay`, and shortened at
    /// random by up to `jitter` (clamped to 0...1) of the capped delay.
    public static func exponential(
        initial: Duration,
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(60),
        jitter: Double = 0
    ) -> Backoff {
        let jitter = min(max(jitter, 0), 1)
        return Backoff { retry in
            let growth = power(multiplier, max(retry - 1, 0))
            let uncapped = initial.nanoseconds * growth
            let capped = min(uncapped.isFinite ? uncapped : .infinity, maxDelay.nanoseconds)
            let jittered = jitter > 0 ? capped * (1 - jitter * Double.random(in: 0...1)) : capped
            return .nanoseconds(Int64(jittered.rounded()))
        }
    }
}

/// `base` raised to a small non-negative integer power, without Foundation.
private func power(_ base: Double, _ exponent: Int) -> Double {
    var result = 1.0
    var remaining = exponent
    while remaining > 0 {
        result *= base
        remaining -= 1
        if !result.isFinite { break }
    }
    return result
}
