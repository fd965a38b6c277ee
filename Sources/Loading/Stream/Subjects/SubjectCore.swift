/// The shared machinery of the subjects: the subscribers, and one delivery loop that sends each event to every
/// subscriber that was there when the event was sent, one event at a time, whichever threads send.
///
/// A sender that finds a delivery in progress queues its event and returns; the delivering thread drains the queue.
/// Events therefore reach every subscriber in the same order, never overlapping, and never under the lock.
@usableFromInline
final class SubjectCore<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    struct Subscriber: Sendable {
        @usableFromInline
        let id: Int
        /// The sequence number of the first broadcast this subscriber should receive.
        @usableFromInline
        let firstSequence: UInt64
        @usableFromInline
        let observer: StreamObserver<Output, Failure>

        @inlinable
        init(id: Int, firstSequence: UInt64, observer: StreamObserver<Output, Failure>) {
            self.id = id
            self.firstSequence = firstSequence
            self.observer = observer
        }
    }

    @usableFromInline
    struct Delivery: Sendable {
        @usableFromInline
        let event: StreamEvent<Output, Failure>
        @usableFromInline
        let sequence: UInt64
        /// A delivery meant for one subscriber only (the current value replayed on subscription).
        @usableFromInline
        let target: Int?

        @inlinable
        init(event: StreamEvent<Output, Failure>, sequence: UInt64, target: Int?) {
            self.event = event
            self.sequence = sequence
            self.target = target
        }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline
        var subscribers: [Subscriber] = []
        @usableFromInline
        var nextID = 0
        @usableFromInline
        var sequence: UInt64 = 0
        @usableFromInline
        var completion: StreamCompletion<Failure>?
        @usableFromInline
        var queue: [Delivery] = []
        @usableFromInline
        var current: Output?

        @inlinable
        init(current: Output?) {
            self.current = current
        }
    }

    @usableFromInline
    let state: Locked<State>
    @usableFromInline
    let turn = DeliveryTurn()

    @inlinable
    init(current: Output?) {
        state = Locked(State(current: current))
    }

    @inlinable
    var current: Output? {
        state.withLock { $0.current }
    }

    /// Broadcasts `event` to the current subscribers; ignored after the subject completed.
    @inlinable
    func send(_ event: StreamEvent<Output, Failure>) {
        let (start, replaced) = state.withLock { state -> ((Delivery, [Subscriber])?, Output?) in
            guard state.completion == nil else { return (nil, nil) }
            var replaced: Output?
            switch event {
            case .value(let value):
                if state.current != nil { replaced = exchange(&state.current, with: value) }
            case .completion(let completion):
                state.completion = completion
            }
            state.sequence += 1
            return (enqueue(Delivery(event: event, sequence: state.sequence, target: nil), in: &state), replaced)
        }
        withExtendedLifetime(replaced) {}  // the previous value is released after unlocking
        if let (delivery, subscribers) = start { deliver(delivery, to: subscribers) }
    }

    /// Replaces the current value with `transform(current)` and broadcasts it, atomically with respect to every
    /// other send (a compare-and-set: `transform` runs outside the lock and again if another send came first); does
    /// nothing when `transform` returns `nil` or the subject completed. Returns the value sent.
    @discardableResult
    @inlinable
    func update(_ transform: (Output) -> Output?) -> Output? {
        while true {
            let read = state.withLock { state in
                state.completion == nil ? state.current.map { ($0, state.sequence) } : nil
            }
            guard let (current, sequence) = read, let next = transform(current) else { return nil }
            let outcome = state.withLock { state -> (sent: Bool, (Delivery, [Subscriber])?, Output?) in
                guard state.completion == nil, state.sequence == sequence else { return (false, nil, nil) }
                let replaced = exchange(&state.current, with: next)
                state.sequence += 1
                let delivery = Delivery(event: .value(next), sequence: state.sequence, target: nil)
                return (true, enqueue(delivery, in: &state), replaced)
            }
            withExtendedLifetime(outcome.2) {}  // the previous value is released after unlocking
            guard outcome.sent else { continue }
            if let (delivery, subscribers) = outcome.1 { deliver(delivery, to: subscribers) }
            return next
        }
    }

    /// Adds `observer`; replays the current value first when `replayCurrent`; after completion, sends only the
    /// completion.
    @inlinable
    func subscribe(_ observer: StreamObserver<Output, Failure>, replayCurrent: Bool) {
        let (id, completion, start) = state.withLock {
            state -> (Int?, StreamCompletion<Failure>?, (Delivery, [Subscriber])?) in
            if let completion = state.completion { return (nil, completion, nil) }
            let id = state.nextID
            state.nextID += 1
            state.subscribers.append(Subscriber(id: id, firstSequence: state.sequence + 1, observer: observer))
            guard replayCurrent, let current = state.current else { return (id, nil, nil) }
            let replay = Delivery(event: .value(current), sequence: state.sequence, target: id)
            return (id, nil, enqueue(replay, in: &state))
        }
        if let completion { return observer.send(completion: completion) }
        if let id {
            observer.onTermination { [weak self] in self?.remove(id) }
        }
        if let (delivery, subscribers) = start { deliver(delivery, to: subscribers) }
    }

    @inlinable
    func remove(_ id: Int) {
        let removed = state.withLock { state -> Subscriber? in
            guard let index = state.subscribers.firstIndex(where: { $0.id == id }) else { return nil }
            return state.subscribers.remove(at: index)
        }
        // Released after unlocking: dropping a subscriber may run its captures' deinits, which may send here.
        withExtendedLifetime(removed) {}
    }

    /// Under the lock: queues `delivery` if another thread is delivering; otherwise makes the caller the deliverer
    /// and returns the delivery with the subscribers to send it to.
    @inlinable
    func enqueue(_ delivery: Delivery, in state: inout State) -> (Delivery, [Subscriber])? {
        guard turn.take() else {
            state.queue.append(delivery)
            return nil
        }
        return (delivery, state.subscribers)
    }

    @inlinable
    func deliver(_ first: Delivery, to firstSubscribers: [Subscriber]) {
        // The first delivery goes out without building a batch: the common case (one sender) allocates nothing,
        // and ends its turn without taking the lock again.
        Self.send(first, to: firstSubscribers)
        var completed = first.event.isCompletion
        while completed || !turn.end() {
            let (batch, subscribers) = nextBatch(after: completed)
            if batch.isEmpty { return }
            for delivery in batch { Self.send(delivery, to: subscribers) }
            completed = batch.contains { $0.event.isCompletion }
        }
    }

    /// Takes what other senders queued meanwhile, or ends the delivery turn. After a completion, also lets go of
    /// the subscribers.
    @inlinable
    func nextBatch(after completed: Bool) -> ([Delivery], [Subscriber]) {
        let (batch, subscribers, finished) = state.withLock { state -> ([Delivery], [Subscriber], [Subscriber]) in
            let finished = completed ? exchange(&state.subscribers, with: []) : []
            guard !state.queue.isEmpty else {
                turn.pass()
                return ([], [], finished)
            }
            turn.keep()
            return (exchange(&state.queue, with: []), state.subscribers, finished)
        }
        withExtendedLifetime(finished) {}  // subscribers of a completed subject are released after unlocking
        return (batch, subscribers)
    }

    @inlinable
    static func send(_ delivery: Delivery, to subscribers: [Subscriber]) {
        // Borrow the elements in place rather than copying each subscriber out (a retain and release each).
        subscribers.withUnsafeBufferPointer { subscribers in
            for index in subscribers.indices {
                let isRecipient =
                    delivery.target.map { $0 == subscribers[index].id }
                    ?? (subscribers[index].firstSequence <= delivery.sequence)
                if isRecipient { subscribers[index].observer.receive(delivery.event) }
            }
        }
    }
}
