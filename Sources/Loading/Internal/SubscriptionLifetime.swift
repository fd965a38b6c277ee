/// The lifetime of one subscription (or of one part of it): active until it is ended, by a cancel or after a
/// terminal event, at which point the clean-up actions registered on it run, once.
///
/// Synchronous operators share their subscriber's lifetime; operators that end their upstream on their own terms
/// (catch, retry, merge, flatMap, receive(on:), debounce) give the upstream a child lifetime, which ends with its
/// parent or on its own.
@usableFromInline
final class SubscriptionLifetime: Sendable {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline
        var isActive = true
        @usableFromInline
        var nextKey = 0
        @usableFromInline
        var actions: [(key: Int, action: @Sendable () -> Void)] = []

        @inlinable
        init() {}
    }

    @usableFromInline
    let state = Locked(State())

    @inlinable
    init() {}

    /// Whether the lifetime has not ended yet.
    @inlinable
    var isActive: Bool {
        state.withLock { $0.isActive }
    }

    /// Runs `action` when the lifetime ends, or at once if it has. Returns a key to remove it with.
    @discardableResult
    @inlinable
    func onEnd(_ action: @escaping @Sendable () -> Void) -> Int? {
        let key = state.withLock { state -> Int? in
            guard state.isActive else { return nil }
            state.nextKey += 1
            state.actions.append((state.nextKey, action))
            return state.nextKey
        }
        if key == nil { action() }
        return key
    }

    /// Forgets the action registered under `key`.
    @inlinable
    func removeAction(_ key: Int) {
        state.withLock { state in
            if let index = state.actions.firstIndex(where: { $0.key == key }) {
                state.actions.remove(at: index)
            }
        }
    }

    /// Ends the lifetime and runs its actions. Returns `false` if it had already ended.
    @discardableResult
    @inlinable
    func end() -> Bool {
        let actions = state.withLock { state -> [(key: Int, action: @Sendable () -> Void)]? in
            guard state.isActive else { return nil }
            state.isActive = false
            defer { state.actions = [] }
            return state.actions
        }
        guard let actions else { return false }
        for entry in actions { entry.action() }
        return true
    }

    /// A lifetime that ends when this one does, or earlier on its own; once ended, it no longer burdens this one.
    @inlinable
    func makeChild() -> SubscriptionLifetime {
        let child = SubscriptionLifetime()
        if let key = onEnd({ [weak child] in child?.end() }) {
            child.onEnd { [weak self] in self?.removeAction(key) }
        }
        return child
    }
}
