/// How many times a failed load is tried, how long to wait between tries, and which errors are worth a retry.
///
/// ```swift
/// let friends = remote.retry(.exponential(initial: .milliseconds(200), maxDelay: .seconds(5), maxAttempts: 4))
/// let patient = remote.retry(.constant(.seconds(1), maxAttempts: 3).retrying { $0 is TimeoutError })
/// let live = liveUpdates.retry(.exponential(initial: .seconds(1), maxAttempts: .max), scheduler: .global())  // for ever
/// ```
/// `maxAttempts: .max` never gives up. An error that conforms to ``RetryAfterError`` can ask for a
/// longer wait (an HTTP `Retry-After`, a server-sent `retry:`), never longer than the policy's `maxDelay`.
public struct RetryPolicy: Sendable {
    /// The number of attempts that means "no limit".
    static let unlimited = Int.max

    /// The total number of attempts, the first included (at least 1); `Int.max` means no limit.
    var maxAttempts: Int
    /// The delay before each retry.
    var backoff: Backoff
    /// The longest wait an error's ``RetryAfterError/retryAfter`` may ask for.
    var maxDelay: Duration
    /// Whether an error is worth another attempt; the load fails at once with errors it rejects.
    var shouldRetry: @Sendable (any Error) -> Bool
    /// An attempt that ran at least this long before failing starts the count, and the backoff, over (see
    /// ``resettingAttempts(after:)``); `nil` never starts over.
    var resetInterval: Duration?
    /// Told of every retry before its wait: which retry it is (1 for the first), how long the wait is, and the error
    /// that caused it (see ``observingRetries(_:)``).
    var retryObserver: (@Sendable (_ retry: Int, _ delay: Duration, _ error: any Error) -> Void)?

    /// Creates a policy; `maxAttempts` below 1 is treated as 1.
    public init(
        maxAttempts: Int,
        backoff: Backoff = Backoff { _ in .zero },
        maxDelay: Duration = .seconds(60),
        shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.backoff = backoff
        self.maxDelay = maxDelay
        self.shouldRetry = shouldRetry
    }

    /// Retries at once, without waiting.
    public static func immediate(maxAttempts: Int) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts)
    }

    /// Waits `delay` before each retry.
    public static func constant(_ delay: Duration, maxAttempts: Int) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, backoff: .constant(delay), maxDelay: max(delay, .seconds(60)))
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
            backoff: .exponential(initial: initial, multiplier: multiplier, maxDelay: maxDelay, jitter: jitter),
            maxDelay: maxDelay)
    }

    /// A copy that tells `observe` of every retry before waiting for it (after the observer already set, if any):
    /// for logs, metrics and ``LoadTrace``.
    ///
    /// ```swift
    /// let observed = remote.retry(.constant(.seconds(1), maxAttempts: 3).observingRetries { retry, delay, error in
    ///     print("retry \(retry) in \(delay) after \(error)")
    /// })
    /// ```
    public func observingRetries(
        _ observe: @escaping @Sendable (_ retry: Int, _ delay: Duration, _ error: any Error) -> Void
    ) -> RetryPolicy {
        var policy = self
        let previous = retryObserver
        policy.retryObserver = { retry, delay, error in
            previous?(retry, delay, error)
            observe(retry, delay, error)
        }
        return policy
    }

    /// A copy that retries only the errors `predicate` accepts, among those this policy retries.
    public func retrying(if predicate: @escaping @Sendable (any Error) -> Bool) -> RetryPolicy {
        var policy = self
        let accepts = shouldRetry
        policy.shouldRetry = { accepts($0) && predicate($0) }
        return policy
    }

    /// A copy under which an attempt that ran at least `interval` before it failed counts as a healthy one: the
    /// next retry is retry 1 again, with the first backoff delay. For long-lived streams (a live connection that
    /// drops after hours should reconnect quickly, one that drops at once should back off more each time).
    public func resettingAttempts(after interval: Duration) -> RetryPolicy {
        var policy = self
        policy.resetInterval = interval
        return policy
    }

    /// Whether attempt number `attempt` (1 for the first), which failed with `error`, is followed by another.
    func allowsRetry(after attempt: Int, error: any Error) -> Bool {
        (maxAttempts == Self.unlimited || attempt < maxAttempts) && shouldRetry(error)
    }

    /// The wait before retry number `retry` (1 for the first) after `error`: the backoff's delay, or the error's
    /// ``RetryAfterError/retryAfter`` when that is longer, capped at `maxDelay`.
    func delay(beforeRetry retry: Int, after error: any Error) -> Duration {
        let planned = backoff.delay(beforeRetry: retry)
        guard let asked = (error as? any RetryAfterError)?.retryAfter, asked > planned else { return planned }
        return max(planned, min(asked, maxDelay))
    }

    /// The number of the attempt that failed, counted as this policy says: 1 again when it ran at least
    /// `resetInterval` (from `start` to `end` on one clock).
    func attemptNumber(_ number: Int, startedAt start: Duration, failedAt end: Duration) -> Int {
        guard let resetInterval, end - start >= resetInterval else { return number }
        return 1
    }
}

/// An error that says how long to wait before trying again, such as an HTTP 429 with `Retry-After` or a server-sent
/// events `retry:` field. ``RetryPolicy`` waits at least that long, and at most its `maxDelay`.
public protocol RetryAfterError: Error {
    /// How long the source asked to wait, if it said.
    var retryAfter: Duration? { get }
}

/// The delay before each retry of a ``RetryPolicy``.
public struct Backoff: Sendable {
    private let delayForRetry: @Sendable (_ retry: Int) -> Duration

    /// Creates a backoff from a function of the retry's number (1 for the first retry).
    public init(_ delayForRetry: @escaping @Sendable (_ retry: Int) -> Duration) {
        self.delayForRetry = delayForRetry
    }

    /// The delay before retry number `retry` (1 for the first retry).
    func delay(beforeRetry retry: Int) -> Duration {
        delayForRetry(retry)
    }

    /// No delay.
    static let none = Backoff { _ in .zero }

    /// The same delay before every retry.
    public static func constant(_ delay: Duration) -> Backoff {
        Backoff { _ in delay }
    }

    /// `initial`, then `multiplier` times longer before each further retry, capped at `maxDelay`, and shortened at
    /// random by up to `jitter` (clamped to 0...1) of the capped delay.
    ///
    /// - Complexity: O(log *retry*) per delay.
    public static func exponential(
        initial: Duration,
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(60),
        jitter: Double = 0
    ) -> Backoff {
        let jitter = min(max(jitter, 0), 1)
        // The largest delay a `Duration` of nanoseconds can hold, so that a huge `maxDelay` cannot trap.
        let ceiling = min(maxDelay.nanoseconds, Double(Int64.max / 2))
        return Backoff { retry in
            let uncapped = initial.nanoseconds * power(multiplier, max(retry - 1, 0))
            let capped = max(0, uncapped.isNaN ? ceiling : min(uncapped, ceiling))
            let jittered = jitter > 0 ? capped * (1 - jitter * Double.random(in: 0...1)) : capped
            return .nanoseconds(Int64(jittered.rounded()))
        }
    }
}

/// `base` raised to a non-negative integer power by repeated squaring, without Foundation.
private func power(_ base: Double, _ exponent: Int) -> Double {
    var result = 1.0
    var factor = base
    var remaining = exponent
    while remaining > 0 {
        if remaining & 1 == 1 { result *= factor }
        remaining >>= 1
        factor *= factor
        if !result.isFinite || result == 0 { break }
    }
    return result
}
