/// Where a queue's optimistic change goes among the others of its queue: the store shows a queue's changes in the
/// order of their sequence numbers, whatever order their callers reached it in (the order the queue sends them).
struct MutationOrder: Sendable {
    /// The queue's identity.
    let queue: Int
    /// The change's place in its queue.
    let sequence: Int
}

/// What a store tells the mutation queues over it when it is cleared (a logout): before anything is cancelled, so
/// that a queue starts no more work and forgets what it holds; then once the store is empty and every queue forgot.
protocol StoreClearObserver: AnyObject, Sendable {
    /// The store is about to be cleared: start nothing more, and forget the mutations held now; call `forgotten` once
    /// they are forgotten, at once or later (a save under way lands first), never waiting on the caller's thread.
    func storeWillClear(forgotten: @escaping @Sendable () -> Void)
    /// The store was cleared and every queue forgot its mutations: what waited for it may go on.
    func storeDidClear()
    /// Another process changed `key` in the shared level, and the store is about to show its value: a queue lets go
    /// of the changes of the key another process sent meanwhile, so that they are not shown twice.
    func anotherProcessChanged(_ key: any Hashable & Sendable)
}

/// The clear observers of a store, held weakly (a queue holds its store, not the other way round).
final class ClearObservers: Sendable {
    private struct Weak: Sendable {
        weak var observer: (any StoreClearObserver)?
    }

    private let observers = Locked<[Weak]>([])

    init() {}

    /// Adds `observer`.
    func add(_ observer: any StoreClearObserver) {
        observers.withLock { observers in
            observers.removeAll { $0.observer == nil }
            observers.append(Weak(observer: observer))
        }
    }

    /// Tells every observer alive now that another process changed `key`.
    func tellAnotherProcessChanged(_ key: any Hashable & Sendable) {
        for observer in observers.withLock({ $0.compactMap(\.observer) }) { observer.anotherProcessChanged(key) }
    }

    /// Tells every observer alive now that a clear begins; returns what the store calls once each of its own
    /// `storeParts` parts of the clear ended. The clear ends once those and each observer's forgetting did: then
    /// every observer is told, and `ended` runs, on the thread that ended last.
    func clearBegins(storeParts: Int, ended: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let observers = observers.withLock { $0.compactMap(\.observer) }  // released after unlocking
        let parts = Countdown(observers.count + storeParts) {
            for observer in observers { observer.storeDidClear() }
            ended()
        }
        for observer in observers { observer.storeWillClear(forgotten: parts.end) }
        return parts.end
    }
}

/// Runs an action once a number of parts have ended, on the thread that ends the last (no thread waits for it).
final class Countdown: Sendable {
    private struct State {
        var remaining: Int
        var action: (@Sendable () -> Void)?
    }
    private let state: Locked<State>

    init(_ parts: Int, then action: @escaping @Sendable () -> Void) {
        state = Locked(State(remaining: parts, action: action))
    }

    /// One part ended; the last runs the action.
    func end() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.remaining -= 1
            return state.remaining == 0 ? state.action.take() : nil
        }
        action?()
    }
}

extension Store {
    /// How many times the store was cleared: a queue reads it before it saves a mutation, and shows the mutation only
    /// if no clear came since (``mutate(_:_:commit:order:unlessClearedSince:completion:)``).
    var clearCount: Int {
        locked { $0.clears }
    }

    /// Tells `observer` of every clear, from now on, for as long as it lives.
    func addClearObserver(_ observer: any StoreClearObserver) {
        clearObservers.add(observer)
    }
}
