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
        switch delivery.accept(isTerminal: event.isCompletion, queuing: { { downstream.receive(event) } }) {
        case .dropped: return false
        case .queued: return true
        case .deliverNow:
            downstream.receive(event)
            delivery.endTurn()
            return true
        }
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

    /// What ``accept(isTerminal:queuing:)`` decided.
    @usableFromInline
    enum Acceptance {
        /// A terminal event came first: the event is dropped.
        case dropped
        /// Another thread is delivering: the event was queued for it.
        case queued
        /// The caller delivers the event now, then calls ``endTurn()``.
        case deliverNow
    }

    private let state = Locked(State())
    private let turn = DeliveryTurn()

    init() {}

    /// Accepts an event (a terminal one when `isTerminal`), queuing what `queuing` makes when another thread
    /// delivers.
    @usableFromInline
    func accept(isTerminal: Bool, queuing: () -> @Sendable () -> Void) -> Acceptance {
        state.withLock { state in
            guard !state.isTerminated else { return .dropped }
            if isTerminal { state.isTerminated = true }
            guard turn.take() else {
                state.queue.append(queuing())
                return .queued
            }
            return .deliverNow
        }
    }

    /// After the caller's delivery: delivers what other threads queued meanwhile, until nothing is left.
    @usableFromInline
    func endTurn() {
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
