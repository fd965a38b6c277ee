/// Delivers events from several threads to one observer without overlap and in the order they were accepted:
/// whichever thread finds the observer idle delivers, draining what others queued meanwhile; the others enqueue
/// and return at once. Nothing is accepted after a terminal event.
@usableFromInline
final class SerializedObserver<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline var queue: [StreamEvent<Output, Failure>] = []
        @usableFromInline var isTerminated = false

        @inlinable
        init() {}
    }

    @usableFromInline let state = Locked(State())
    @usableFromInline let turn = DeliveryTurn()
    @usableFromInline let downstream: StreamObserver<Output, Failure>

    @inlinable
    init(_ downstream: StreamObserver<Output, Failure>) {
        self.downstream = downstream
    }

    /// Accepts `event` for delivery; returns `false` when it was dropped because a terminal event came first.
    @discardableResult
    @inlinable
    func send(_ event: StreamEvent<Output, Failure>) -> Bool {
        let (accepted, deliverNow) = state.withLock { state -> (Bool, Bool) in
            guard !state.isTerminated else { return (false, false) }
            if event.isCompletion { state.isTerminated = true }
            guard turn.take() else {
                state.queue.append(event)
                return (true, false)
            }
            return (true, true)
        }
        guard deliverNow else { return accepted }
        downstream.receive(event)
        // Nothing queued meanwhile (the common case): the turn ends without the lock.
        while !turn.end() {
            let batch = state.withLock { state -> [StreamEvent<Output, Failure>] in
                guard !state.queue.isEmpty else {
                    turn.pass()
                    return []
                }
                turn.keep()
                return exchange(&state.queue, with: [])
            }
            if batch.isEmpty { return true }
            for queued in batch { downstream.receive(queued) }
        }
        return true
    }
}
