/// The shared machinery of the subjects: the subscribers, and one delivery loop that sends each event to every
/// subscriber that was there when the event was sent, one event at a time, whichever threads send.
///
/// A sender that finds a delivery in progress queues its event and returns; the delivering thread drains the queue.
/// Events therefore reach every subscriber in the same order, never overlapping, and never under the lock.
final class SubjectCore<Output: Sendable, Failure: Error>: Sendable {
    private struct Subscriber: Sendable {
        let id: Int
        /// The sequence number of the first broadcast this subscriber should receive.
        let firstSequence: UInt64
        let observer: StreamObserver<Output, Failure>
    }

    private struct Delivery: Sendable {
        let event: StreamEvent<Output, Failure>
        let sequence: UInt64
        /// A delivery meant for one subscriber only (the current value replayed on subscription).
        let target: Int?
    }

    private struct State: Sendable {
        var subscribers: [Subscriber] = []
        var nextID = 0
        var sequence: UInt64 = 0
        var completion: StreamCompletion<Failure>?
        var queue: [Delivery] = []
        var isDelivering = false
        var current: Output?
    }

    private let state: Locked<State>

    init(current: Output?) {
        state = Locked(State(current: current))
    }

    var current: Output? {
        state.withLock { $0.current }
    }

    var isCompleted: Bool {
        state.withLock { $0.completion != nil }
    }

    /// Broadcasts `event` to the current subscribers; ignored after the subject completed.
    func send(_ event: StreamEvent<Output, Failure>) {
        let start = state.withLock { state -> (Delivery, [Subscriber])? in
            guard state.completion == nil else { return nil }
            switch event {
            case .value(let value):
                if state.current != nil { state.current = value }
            case .completion(let completion):
                state.completion = completion
            }
            state.sequence += 1
            return Self.enqueue(Delivery(event: event, sequence: state.sequence, target: nil), in: &state)
        }
        if let (delivery, subscribers) = start { deliver(delivery, to: subscribers) }
    }

    /// Replaces the current value with `transform(current)` and broadcasts it, atomically with respect to every
    /// other send; does nothing when `transform` returns `nil` or the subject completed. `transform` runs under the
    /// subject's lock: it must be a pure function of the value. Returns the value sent.
    @discardableResult
    func update(_ transform: (Output) -> Output?) -> Output? {
        let (sent, start) = state.withLock { state -> (Output?, (Delivery, [Subscriber])?) in
            guard state.completion == nil, let current = state.current, let next = transform(current) else {
                return (nil, nil)
            }
            state.current = next
            state.sequence += 1
            return (next, Self.enqueue(Delivery(event: .value(next), sequence: state.sequence, target: nil), in: &state))
        }
        if let (delivery, subscribers) = start { deliver(delivery, to: subscribers) }
        return sent
    }

    /// Adds `observer`; replays the current value first when `replayCurrent`; after completion, sends only the
    /// completion.
    func subscribe(_ observer: StreamObserver<Output, Failure>, replayCurrent: Bool) {
        let (id, completion, start) = state.withLock {
            state -> (Int?, StreamCompletion<Failure>?, (Delivery, [Subscriber])?) in
            if let completion = state.completion { return (nil, completion, nil) }
            let id = state.nextID
            state.nextID += 1
            state.subscribers.append(Subscriber(id: id, firstSequence: state.sequence + 1, observer: observer))
            guard replayCurrent, let current = state.current else { return (id, nil, nil) }
            let replay = Delivery(event: .value(current), sequence: state.sequence, target: id)
            return (id, nil, Self.enqueue(replay, in: &state))
        }
        if let completion { return observer.send(completion: completion) }
        if let id {
            observer.onTermination { [weak self] in self?.remove(id) }
        }
        if let (delivery, subscribers) = start { deliver(delivery, to: subscribers) }
    }

    private func remove(_ id: Int) {
        state.withLock { state in
            if let index = state.subscribers.firstIndex(where: { $0.id == id }) {
                state.subscribers.remove(at: index)
            }
        }
    }

    /// Queues `delivery` if another thread is delivering; otherwise makes the caller the deliverer and returns the
    /// delivery with the subscribers to send it to.
    private static func enqueue(_ delivery: Delivery, in state: inout State) -> (Delivery, [Subscriber])? {
        guard !state.isDelivering else {
            state.queue.append(delivery)
            return nil
        }
        state.isDelivering = true
        return (delivery, state.subscribers)
    }

    private func deliver(_ first: Delivery, to firstSubscribers: [Subscriber]) {
        var batch = [first]
        var subscribers = firstSubscribers
        while !batch.isEmpty {
            for delivery in batch {
                for subscriber in subscribers
                where delivery.target.map({ $0 == subscriber.id }) ?? (subscriber.firstSequence <= delivery.sequence) {
                    subscriber.observer.receive(delivery.event)
                }
            }
            (batch, subscribers) = state.withLock { state in
                if batch.contains(where: { $0.event.isCompletion }) { state.subscribers = [] }
                defer { state.queue = [] }
                if state.queue.isEmpty { state.isDelivering = false }
                return (state.queue, state.subscribers)
            }
        }
    }
}
