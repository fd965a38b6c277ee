import Loading

/// A subscriber for tests that records a stream's whole event history, and notices if two events ever overlap in
/// time (which the stream contract forbids).
///
/// ```swift
/// let recorder = StreamRecorder(EventStream<Int, Never>.sequence([1, 2]))
/// XCTAssertEqual(recorder.events, [.value(1), .value(2), .completion(.finished)])
/// ```
public final class StreamRecorder<Output: Sendable, Failure: Error>: Sendable {
    private struct State: Sendable {
        var events: [StreamEvent<Output, Failure>] = []
        var isDelivering = false
        var overlaps = 0
        var subscription: StreamSubscription?
        var isCancelled = false
    }

    private let state = Locked(State())
    private let onEvent: (@Sendable (StreamEvent<Output, Failure>) -> Void)?

    /// Subscribes to `stream` at once and records what it sends. `onEvent` runs inside each delivery, after the
    /// event is recorded.
    public init(
        _ stream: EventStream<Output, Failure>, onEvent: (@Sendable (StreamEvent<Output, Failure>) -> Void)? = nil
    ) {
        self.onEvent = onEvent
        let subscription = stream.sink { [weak self] completion in
            self?.record(.completion(completion))
        } receiveValue: { [weak self] value in
            self?.record(.value(value))
        }
        state.withLock { $0.subscription = subscription }
    }

    private func record(_ event: StreamEvent<Output, Failure>) {
        state.withLock { state in
            if state.isDelivering { state.overlaps += 1 }
            state.isDelivering = true
            state.events.append(event)
        }
        onEvent?(event)
        state.withLock { $0.isDelivering = false }
    }

    /// Every event received, in order.
    public var events: [StreamEvent<Output, Failure>] {
        state.withLock { $0.events }
    }

    /// The values received, in order.
    public var values: [Output] {
        events.compactMap {
            if case .value(let value) = $0 { return value }
            return nil
        }
    }

    /// The terminal event, if one was received.
    public var completion: StreamCompletion<Failure>? {
        for case .completion(let completion) in events { return completion }
        return nil
    }

    /// How many times an event arrived while another was still being delivered. Always 0 for a correct stream.
    public var overlappingDeliveries: Int {
        state.withLock { $0.overlaps }
    }

    /// Whether the subscription is still active: neither cancelled nor completed.
    public var isSubscribed: Bool {
        state.withLock { state in
            state.subscription != nil && !state.isCancelled
                && !state.events.contains { if case .completion = $0 { true } else { false } }
        }
    }

    /// Cancels the subscription.
    public func cancel() {
        let subscription = state.withLock { state in
            state.isCancelled = true
            return state.subscription
        }
        subscription?.cancel()
    }
}
