/// A passthrough subject: a stream you send values into by hand, multicast to every current subscriber.
///
/// ```swift
/// let updates = StreamSubject<Friend, Never>()
/// let subscription = updates.stream.sink { print($0.name) }
/// updates.send(ada)
/// ```
/// Safe to send to from any thread: each subscriber receives events one at a time, in the same order as every
/// other subscriber. A subscriber receives only what is sent after it subscribed; one that arrives after completion
/// receives only the completion.
public final class StreamSubject<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    let core = SubjectCore(current: nil)

    /// Creates a subject with no subscribers.
    @inlinable
    public init() {}

    /// The stream of what is sent to this subject.
    public var stream: EventStream<Output, Failure> {
        EventStream { [core] observer in core.subscribe(observer, replayingCurrent: false) }
    }

    /// Sends `value` to every subscriber.
    @inlinable
    public func send(_ value: Output) {
        core.send(StreamEvent<Output, Failure>.value(value))
    }

    /// Completes the subject: every subscriber, present and future, receives `completion`; later sends are ignored.
    @inlinable
    public func send(completion: StreamCompletion<Failure>) {
        core.send(StreamEvent<Output, Failure>.completion(completion))
    }
}
