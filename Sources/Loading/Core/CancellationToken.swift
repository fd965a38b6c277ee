/// A handle that cancels work in flight: a load, a scheduled action or a stream subscription.
///
/// Cancelling is idempotent and safe from any thread. Once `cancel()` returns, the work it stands for begins no
/// further delivery: a load's completion is not called, a scheduled action does not start, a subscriber receives no
/// new event. A delivery that already began on another thread may still be running; from the delivering thread
/// itself, nothing arrives after `cancel()`.
///
/// ```swift
/// let token = friends.load { result in show(result) }
/// token.cancel() // `show` will not be called
/// ```
public protocol CancellationToken: Sendable {
    /// Stops the work; later calls do nothing.
    func cancel()
}

/// A cancellation token that runs a closure the first time it is cancelled.
///
/// Use it to wrap a callback API's own handle when building a loader or a stream:
/// ```swift
/// let page = AnyLoader<Data> { completion in
///     let task = session.dataTask(with: url) { data, _, error in
///         completion(data.map { .success($0) } ?? .failure(error ?? URLError(.badServerResponse)))
///     }
///     task.resume()
///     return AnyCancellationToken { task.cancel() }
/// }
/// ```
public final class AnyCancellationToken: CancellationToken {
    /// The action not run yet, `nil` once cancelled. A struct of its own rather than a bare optional: releasing the
    /// token then destroys a concrete type, where an `Optional` of a closure is destroyed through generic value
    /// witnesses (about 500 instructions per token).
    private struct Pending: Sendable {
        var action: (@Sendable () -> Void)?
    }

    private let action: Locked<Pending>

    /// Creates a token that runs `action` once, on the first `cancel()`.
    public init(_ action: @escaping @Sendable () -> Void) {
        self.action = Locked(Pending(action: action))
    }

    /// Whether `cancel()` has been called.
    public var isCancelled: Bool {
        action.withLock { $0.action == nil }
    }

    public func cancel() {
        let action = self.action.withLock { $0.action.take() }
        action?()
    }
}

/// The token of a load that completed before returning, or of work that has nothing left to cancel: cancelling it
/// does nothing, and it costs no allocation (unlike `AnyCancellationToken {}`, which holds a lock box).
@usableFromInline
struct FinishedToken: CancellationToken {
    @inlinable
    init() {}

    @inlinable
    func cancel() {}
}
