/// The state a subject shares between threads: subscribers, the order of events, a queue for senders that find a
/// delivery in progress, and the current value. Not generic, so it is compiled once in `Loading`: values,
/// completions and observers are kept as objects of types it does not know, and each subject's face gives them back
/// their types (the generic one of ``StreamSubject`` and ``CurrentValueStreamSubject``, ``SubjectCore/send(_:)``,
/// inlined where the types are known; the store's ``ResponseSubject``).
///
/// A sender that finds a delivery in progress queues its event and returns; the delivering thread drains the queue.
/// Events therefore reach every subscriber in the same order, never overlapping, and never under the lock.
@usableFromInline
final class SubjectCore: Sendable {
    /// A value, completion or observer, kept as an object of a type only the subject's face knows.
    @usableFromInline
    typealias Object = any AnyObject & Sendable

    /// A delivery with the subscribers it may reach, given to the face for each event it delivers.
    @usableFromInline
    struct Broadcast: Sendable {
        fileprivate let delivery: Delivery
        fileprivate let subscribers: [Subscriber]

        /// The value or completion delivered, when it was queued or kept (`nil`: the event of the sender
        /// delivering it, which that sender holds with its type).
        @usableFromInline
        var object: Object? { delivery.object }

        /// Whether the event is the completion.
        @usableFromInline
        var isCompletion: Bool { delivery.isCompletion }

        /// Calls `body` with the observer of each subscriber the delivery is meant for, in the order they came.
        @usableFromInline
        func forEachRecipient(_ body: (Object) -> Void) {
            // Borrow the elements in place rather than copying each subscriber out (a retain and release each).
            subscribers.withUnsafeBufferPointer { subscribers in
                for index in subscribers.indices where delivery.isMeant(for: subscribers[index]) {
                    body(subscribers[index].observer)
                }
            }
        }
    }

    /// What ``subscribe(_:replayingCurrent:)`` did.
    enum Subscription: Sendable {
        /// The subject had completed: the subscriber gets this completion only, and is not kept.
        case completed(Object)
        /// The subscriber was added under `id`; `replay`, when the caller delivers it,
        /// gives it the current value.
        case added(id: Int, replay: Broadcast?)
    }

    fileprivate struct Subscriber: Sendable {
        let id: Int
        /// The sequence number of the first broadcast this subscriber should receive.
        let firstSequence: UInt64
        let observer: Object

        /// Whether this is the place of a subscriber removed (no delivery is meant for it).
        var isGap: Bool { firstSequence == .max }
    }

    /// An event numbered in the order of sending.
    fileprivate struct Delivery: Sendable {
        /// The value or completion queued or kept here, of the type ``isCompletion`` says; `nil` for the event of
        /// the sender delivering it, which that sender holds with its type.
        let object: Object?
        let isCompletion: Bool
        let sequence: UInt64
        /// A delivery meant for one subscriber only (the current value replayed on subscription).
        let target: Int?

        func isMeant(for subscriber: Subscriber) -> Bool {
            target.map { $0 == subscriber.id && !subscriber.isGap } ?? (subscriber.firstSequence <= sequence)
        }
    }

    private struct State: Sendable {
        /// In the order of their ids. A subscriber removed leaves a gap (see ``remove(_:)``).
        var subscribers: [Subscriber] = []
        var gaps = 0
        /// Whether `subscribers` was handed to a delivery since it was last copied: then it is copied before a
        /// subscriber in it is replaced, so that the write never lands in storage a delivery on another thread read.
        /// Copy-on-write would order the two through the storage's reference count, which the thread sanitizer does
        /// not see (the runtime is not instrumented); the copy is made once after a delivery, not once per removal.
        var isHandedOut = false

        /// The subscribers, for a delivery.
        mutating func handOut() -> [Subscriber] {
            isHandedOut = true
            return subscribers
        }
        var nextID = 0
        var sequence: UInt64 = 0
        var completion: Object?
        var queue: [Delivery] = []
        var current: Object?
    }

    private let state: Locked<State>
    private let turn = DeliveryTurn()

    /// What a gap left by a removed subscriber holds in place of an observer.
    private static let gap: Object = Gap()

    private final class Gap: Sendable {}

    /// Creates a core holding `current` (a subject with a current value), or none.
    @usableFromInline
    init(current: Object?) {
        var state = State()
        state.current = current
        self.state = Locked(state)
    }

    /// The current value, for a subject created with one.
    var current: Object? {
        state.withLock { $0.current }
    }

    /// The current value (`nil` before the first, for a subject created without one) and the sequence number it
    /// was sent with; `nil` after completion.
    func currentWithSequence() -> (value: Object?, sequence: UInt64)? {
        state.withLock { state in
            guard state.completion == nil else { return nil }
            return (state.current, state.sequence)
        }
    }

    /// Sends the event `boxed` makes: a value, which becomes current when the subject keeps one (`boxed` is then
    /// called, under the lock, only when the value is kept or queued), or, when `isCompletion`, the completion (later
    /// sends are ignored, later subscribers get it only). When no other thread is delivering, the caller delivers it
    /// (and what others queue meanwhile) through `send`; ignored after completion.
    @usableFromInline
    func send(_ boxed: () -> Object, isCompletion: Bool, through send: (Broadcast) -> Void) {
        let (first, replaced) = state.withLock { state -> (Broadcast?, Object?) in
            guard state.completion == nil else { return (nil, nil) }
            state.sequence += 1
            if isCompletion {
                let completion = boxed()
                state.completion = completion
                return (takeTurn(queuing: { completion }, isCompletion: true, in: &state), nil)
            }
            var kept: Object?
            var replaced: Object?
            if state.current != nil {
                kept = boxed()
                replaced = exchange(&state.current, with: kept)
            }
            return (takeTurn(queuing: { kept ?? boxed() }, isCompletion: false, in: &state), replaced)
        }
        withExtendedLifetime(replaced) {}  // the previous value is released after unlocking
        if let first { deliver(first, through: send) }
    }

    /// Replaces the current value with `value` if nothing was sent since `sequence` (a compare-and-set), and sends it
    /// as ``send(_:isCompletion:through:)`` says. Returns whether it was replaced.
    func replace(at sequence: UInt64, with value: Object, through send: (Broadcast) -> Void) -> Bool {
        let (replaced, first, previous) = state.withLock { state -> (Bool, Broadcast?, Object?) in
            guard state.completion == nil, state.sequence == sequence else { return (false, nil, nil) }
            let previous = state.current
            state.current = value
            state.sequence += 1
            return (true, takeTurn(queuing: { value }, isCompletion: false, in: &state), previous)
        }
        withExtendedLifetime(previous) {}  // the previous value is released after unlocking
        if let first { deliver(first, through: send) }
        return replaced
    }

    /// Replaces the current value with `value`, unless `isAsNew` says the current one is as new, and sends it as
    /// ``send(_:isCompletion:through:)`` says: one step under the lock, where ``replace(at:with:through:)`` after a
    /// look at the current value takes two. `isAsNew` runs under the lock: a comparison of the caller's own values,
    /// never the app's code.
    func replace(with value: Object, unlessCurrent isAsNew: (Object) -> Bool, through send: (Broadcast) -> Void) {
        let (first, previous) = state.withLock { state -> (Broadcast?, Object?) in
            guard state.completion == nil else { return (nil, nil) }
            if let current = state.current, isAsNew(current) { return (nil, nil) }
            let previous = state.current
            state.current = value
            state.sequence += 1
            return (takeTurn(queuing: { value }, isCompletion: false, in: &state), previous)
        }
        withExtendedLifetime(previous) {}  // the previous value is released after unlocking
        if let first { deliver(first, through: send) }
    }

    /// Adds `observer`, and replays the current value to it first when `replayingCurrent`.
    func subscribe(_ observer: Object, replayingCurrent: Bool) -> Subscription {
        state.withLock { state -> Subscription in
            if let completion = state.completion { return .completed(completion) }
            let id = state.nextID
            state.nextID += 1
            state.subscribers.append(Subscriber(id: id, firstSequence: state.sequence + 1, observer: observer))
            guard replayingCurrent, let current = state.current else { return .added(id: id, replay: nil) }
            let replay = Delivery(object: current, isCompletion: false, sequence: state.sequence, target: id)
            return .added(id: id, replay: takeTurn(replay, in: &state))
        }
    }

    /// Forgets the subscriber `id`: found by halving (ids grow in the order subscribers came), it leaves a gap in its
    /// place, and the gaps are closed up once they are half of the list, so that a removal costs the same however
    /// many subscribers there are (the list is not shifted each time).
    func remove(_ id: Int) {
        let removed = state.withLock { state -> Subscriber? in
            var low = 0
            var high = state.subscribers.count
            while low < high {
                let middle = low + (high - low) / 2
                if state.subscribers[middle].id < id { low = middle + 1 } else { high = middle }
            }
            guard low < state.subscribers.count, state.subscribers[low].id == id, !state.subscribers[low].isGap else {
                return nil
            }
            let removed = state.subscribers[low]
            if state.isHandedOut {
                state.subscribers = state.subscribers.map { $0 }
                state.isHandedOut = false
            }
            state.subscribers[low] = Subscriber(id: id, firstSequence: .max, observer: Self.gap)
            state.gaps += 1
            if state.gaps == state.subscribers.count {
                state.subscribers = []
                state.gaps = 0
            } else if state.gaps > 16, state.gaps * 2 > state.subscribers.count {
                state.subscribers.removeAll { $0.isGap }
                state.gaps = 0
            }
            return removed
        }
        // Released after unlocking: dropping a subscriber may run its captures' deinits, which may send here.
        withExtendedLifetime(removed) {}
    }

    /// Delivers `first`, then what other senders queued meanwhile, calling `send` with each, outside
    /// the lock, until nothing is queued: for the replay ``subscribe(_:replayingCurrent:)`` gives.
    func deliver(_ first: Broadcast, through send: (Broadcast) -> Void) {
        // The first delivery goes out without building a batch: the common case (one sender) allocates nothing,
        // and ends its turn without taking the lock again.
        send(first)
        var completed = first.delivery.isCompletion
        while completed || !turn.end() {
            let (batch, subscribers) = nextBatch(after: completed)
            if batch.isEmpty { return }
            for delivery in batch { send(Broadcast(delivery: delivery, subscribers: subscribers)) }
            completed = batch.contains { $0.isCompletion }
        }
    }

    /// Under the lock, for a sender whose event has the number `state.sequence`: makes the caller the deliverer
    /// of its own event when nobody is delivering, or queues the event (made by `queued`) for the deliverer.
    private func takeTurn(queuing queued: () -> Object, isCompletion: Bool, in state: inout State) -> Broadcast? {
        guard turn.take() else {
            let delivery = Delivery(object: queued(), isCompletion: isCompletion, sequence: state.sequence, target: nil)
            state.queue.append(delivery)
            return nil
        }
        let delivery = Delivery(object: nil, isCompletion: isCompletion, sequence: state.sequence, target: nil)
        return Broadcast(delivery: delivery, subscribers: state.handOut())
    }

    /// Under the lock: makes the caller the deliverer of `delivery` when nobody is delivering, or queues it.
    private func takeTurn(_ delivery: Delivery, in state: inout State) -> Broadcast? {
        guard turn.take() else {
            state.queue.append(delivery)
            return nil
        }
        return Broadcast(delivery: delivery, subscribers: state.handOut())
    }

    /// Takes what other senders queued meanwhile, or ends the delivery turn. After a completion, also lets go of
    /// the subscribers.
    private func nextBatch(after completed: Bool) -> ([Delivery], [Subscriber]) {
        let (batch, subscribers, finished) = state.withLock { state -> ([Delivery], [Subscriber], [Subscriber]) in
            let finished = completed ? exchange(&state.subscribers, with: []) : []
            if completed { state.gaps = 0 }
            guard !state.queue.isEmpty else {
                turn.pass()
                return ([], [], finished)
            }
            turn.keep()
            return (exchange(&state.queue, with: []), state.handOut(), finished)
        }
        withExtendedLifetime(finished) {}  // subscribers of a completed subject are released after unlocking
        return (batch, subscribers)
    }
}
