/// A stream of values over time that ends with at most one terminal event: Loading's small, push-based reactive
/// type, with the vocabulary of Combine and a stricter contract.
///
/// A stream is a lazy description, a `Sendable` value: nothing happens until it is subscribed to, and each
/// subscription runs it anew (except for ``future(_:)`` and the subjects, which share one source). Factories
/// create streams, operator methods return new ones, and ``sink(receiveCompletion:receiveValue:)`` subscribes:
/// ```swift
/// let subscription = EventStream<Int, Never>.sequence(1...5)
///     .filter { $0.isMultiple(of: 2) }
///     .map { $0 * 10 }
///     .sink { print($0) } // 20, 40
/// ```
///
/// ## Contract
/// - A subscriber receives values, then at most one terminal event (finished or failure), and nothing after it.
/// - Events to one subscriber never overlap in time, even when a merge or a subject is fed from several threads.
/// - Once `cancel()` on a subscription returns, no further delivery begins (stricter than Combine, where `catch`
///   and `receive(on:)` may still start one); an event already being delivered on another thread may finish.
///   Cancelling is idempotent and thread-safe.
///
/// The full text, with the thread each operator delivers on, is the *Contract* article.
public struct EventStream<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let subscribeBody: @Sendable (StreamObserver<Output, Failure>) -> Void

    /// Creates a stream from a closure that runs for each subscription and sends events to `observer`.
    ///
    /// Check `observer.isCancelled` in long loops and register clean-up with `observer.onTermination(_:)`;
    /// events sent after the subscription ended are dropped. Do not send from several threads at once.
    /// ```swift
    /// let ticks = EventStream<Int, Never> { observer in
    ///     let timer = startTimer { tick in observer.send(tick) }
    ///     observer.onTermination { timer.invalidate() }
    /// }
    /// ```
    @inlinable
    public init(_ subscribe: @escaping @Sendable (StreamObserver<Output, Failure>) -> Void) {
        subscribeBody = subscribe
    }

    /// Runs the stream for `observer`.
    @inlinable
    func subscribe(_ observer: StreamObserver<Output, Failure>) {
        subscribeBody(observer)
    }
}

/// How a stream ended: it finished normally or failed with an error.
public enum StreamCompletion<Failure: Error>: Sendable {
    /// The stream finished normally.
    case finished
    /// The stream failed.
    case failure(Failure)
}

extension StreamCompletion: Equatable where Failure: Equatable {}

/// One event of a stream: a value, or the terminal event.
public enum StreamEvent<Output: Sendable, Failure: Error>: Sendable {
    /// A value.
    case value(Output)
    /// The terminal event.
    case completion(StreamCompletion<Failure>)

    /// Whether this is the terminal event.
    var isCompletion: Bool {
        if case .completion = self { return true }
        return false
    }
}

extension StreamEvent: Equatable where Output: Equatable, Failure: Equatable {}

/// The receiving end of one subscription, handed to the closure that creates a stream (``EventStream/init(_:)``).
///
/// Sending is safe from any thread, but a source must not send from several threads at once (the operators that
/// combine sources, such as merge and the subjects, serialize for you). Events sent after the subscription ended
/// are ignored.
public struct StreamObserver<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let receive: @Sendable (StreamEvent<Output, Failure>) -> Void
    @usableFromInline
    let lifetime: SubscriptionLifetime

    @inlinable
    init(lifetime: SubscriptionLifetime, receive: @escaping @Sendable (StreamEvent<Output, Failure>) -> Void) {
        self.receive = receive
        self.lifetime = lifetime
    }

    /// Sends a value.
    @inlinable
    public func send(_ value: Output) {
        receive(.value(value))
    }

    /// Sends the terminal event.
    @inlinable
    func send(completion: StreamCompletion<Failure>) {
        receive(.completion(completion))
    }

    /// Sends `.finished`.
    @inlinable
    public func finish() {
        receive(.completion(.finished))
    }

    /// Sends a result as a single-value stream does: the value then `.finished`, or the failure.
    func send(result: Result<Output, Failure>) {
        switch result {
        case .success(let value):
            receive(.value(value))
            receive(.completion(.finished))
        case .failure(let error):
            receive(.completion(.failure(error)))
        }
    }

    /// Sends `.failure(error)`.
    @inlinable
    public func fail(_ error: Failure) {
        receive(.completion(.failure(error)))
    }

    /// Whether the subscription has ended (cancelled, or completed downstream): a source should stop working.
    @inlinable
    public var isCancelled: Bool {
        !lifetime.isActive
    }

    /// Runs `action` once when the subscription ends, by cancellation or after its terminal event; at once if it
    /// already has. The place to stop a source's work.
    @inlinable
    public func onTermination(_ action: @escaping @Sendable () -> Void) {
        lifetime.onEnd(action)
    }

    /// An observer with the same lifetime whose events go to `receive`.
    @inlinable
    func with<NewOutput, NewFailure>(
        _ receive: @escaping @Sendable (StreamEvent<NewOutput, NewFailure>) -> Void
    ) -> StreamObserver<NewOutput, NewFailure> {
        StreamObserver<NewOutput, NewFailure>(lifetime: lifetime, receive: receive)
    }

}
