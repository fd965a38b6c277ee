/// Work that waits for level writes to finish: the answers of a fetch, the completion of a confirmed optimistic
/// change, the completion of a flush. A level operation that carries a ticket holds it until it is issued, and each
/// level write issued for it holds it until the write completes; the work runs, once, when the last hold is released.
@usableFromInline
final class StoreSaveTicket: Sendable {
    @usableFromInline let state: Locked<(holds: Int, then: (@Sendable () -> Void)?)>

    /// A ticket with one hold (its maker's, or the level operation's it is made for).
    @inlinable
    init(then: (@Sendable () -> Void)? = nil) {
        state = Locked((1, then))
    }

    /// Sets the work to run once every hold is released; only before the ticket's first release.
    @inlinable
    func whenSaved(_ then: @escaping @Sendable () -> Void) {
        state.withLock { $0.then = then }
    }

    @inlinable
    func hold() {
        state.withLock { $0.holds += 1 }
    }

    /// Releases a hold; the last runs the work (here, after unlocking).
    @inlinable
    func release() {
        let then = state.withLock { state -> (@Sendable () -> Void)? in
            state.holds -= 1
            guard state.holds == 0 else { return nil }
            defer { state.then = nil }
            return state.then
        }
        then?()
    }
}
