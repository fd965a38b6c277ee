/// A subject that holds a current value: each new subscriber receives it first, then every later value.
///
/// ```swift
/// let state = CurrentValueStreamSubject<LoadingState<[Friend]>, Never>(.idle)
/// let subscription = state.stream.sink { render($0) } // .idle at once
/// state.send(.loading(previous: nil))
/// ```
/// Safe to send to from any thread; see ``StreamSubject`` for the delivery rules.
public final class CurrentValueStreamSubject<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let core: SubjectCore

    /// Creates a subject holding `value`.
    @inlinable
    public init(_ value: Output) {
        core = SubjectCore(current: SubjectBox(value))
    }

    /// The current value. Setting it sends the new value to every subscriber (ignored after completion).
    public var value: Output {
        get {
            // The core always holds a value: it is created with one and only ever replaces it.
            (core.current as! SubjectBox<Output>).boxed
        }
        set { send(newValue) }
    }

    /// The current value followed by every value sent after it.
    public var stream: EventStream<Output, Failure> {
        EventStream { [core] observer in core.subscribe(observer, replayingCurrent: true) }
    }

    /// Makes `value` current and sends it to every subscriber.
    @inlinable
    public func send(_ value: Output) {
        core.send(StreamEvent<Output, Failure>.value(value))
    }

    /// Replaces the current value with `transform(current)` and sends it, atomically with respect to every other
    /// send (a compare-and-set); nothing happens when `transform` returns `nil`. Returns the value sent.
    @discardableResult
    func update(_ transform: (Output) -> Output?) -> Output? {
        core.update(transform, failing: Failure.self)
    }

    /// Completes the subject: every subscriber, present and future, receives `completion`; later sends are ignored.
    @inlinable
    public func send(completion: StreamCompletion<Failure>) {
        core.send(StreamEvent<Output, Failure>.completion(completion))
    }
}
