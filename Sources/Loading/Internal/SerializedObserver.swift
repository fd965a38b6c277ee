/// Delivers events from several threads to one observer without overlap and in the order they were accepted:
/// whichever thread finds the observer idle delivers, draining what others queued meanwhile; the others enqueue
/// and return at once. Nothing is accepted after a terminal event.
///
/// A thin generic face over ``SerialDelivery``, which is not generic: the face is specialized where the stream is
/// built, and the state it shares between threads is compiled once, here.
@usableFromInline
struct SerializedObserver<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline let delivery = SerialDelivery()
    @usableFromInline let downstream: StreamObserver<Output, Failure>

    @inlinable
    init(_ downstream: StreamObserver<Output, Failure>) {
        self.downstream = downstream
    }

    /// Accepts `event` for delivery; returns `false` when it was dropped because a terminal event came first.
    @discardableResult
    @inlinable
    func send(_ event: StreamEvent<Output, Failure>) -> Bool {
        // The queued delivery is made only when another thread is delivering.
        let downstream = downstream
        var isTerminal = false
        if case .completion = event { isTerminal = true }
        return delivery.deliver(
            isTerminal: isTerminal, now: { downstream.receive(event) },
            queuing: { { downstream.receive(event) } })
    }
}

/// Whose turn it is to deliver to one observer, and what waits for that turn: the state ``SerializedObserver`` shares
/// between the threads that send, with the deliveries queued as closures so that it needs no type of the events.
@usableFromInline
final class SerialDelivery: Sendable {
    private struct State: Sendable {
        var queue: [@Sendable () -> Void] = []
        var isTerminated = false
    }

    private let state = Locked(State())
    private let turn = DeliveryTurn()

    init() {}

    /// Delivers an event (a terminal one when `isTerminal`) with `now` when no other thread is delivering, then
    /// what other threads queued meanwhile, until nothing is left; otherwise queues what `queuing` makes for the
    /// thread delivering. Returns `false` when the event was dropped because a terminal event came first.
    @usableFromInline
    func deliver(isTerminal: Bool, now: () -> Void, queuing: () -> @Sendable () -> Void) -> Bool {
        let delivers = state.withLock { state -> Bool? in
            guard !state.isTerminated else { return nil }
            if isTerminal { state.isTerminated = true }
            guard turn.take() else {
                state.queue.append(queuing())
                return false
            }
            return true
        }
        guard let delivers else { return false }
        if delivers {
            now()
            endTurn()
        }
        return true
    }

    /// After the caller's delivery: delivers what other threads queued meanwhile, until nothing is left.
    private func endTurn() {
        // Nothing queued meanwhile (the common case): the turn ends without the lock.
        while !turn.end() {
            let batch = state.withLock { state -> [@Sendable () -> Void] in
                guard !state.queue.isEmpty else {
                    turn.pass()
                    return []
                }
                turn.keep()
                return exchange(&state.queue, with: [])
            }
            if batch.isEmpty { return }
            for delivery in batch { delivery() }
        }
    }
}
