/// Where a queue's optimistic change goes among the others of its queue: the store shows a queue's changes in the
/// order of their sequence numbers, whatever order their callers reached it in (the order the queue sends them).
struct MutationOrder: Sendable {
    /// The queue's identity.
    let queue: Int
    /// The change's place in its queue.
    let sequence: Int
}

/// What a store tells the mutation queues over it when it is cleared (a logout): before anything is cancelled, so
/// that a queue starts no more work and forgets what it holds; then once the store is empty.
protocol StoreClearObserver: AnyObject, Sendable {
    /// The store is about to be cleared: start nothing more, and forget the mutations held now.
    func storeWillClear()
    /// The store was cleared: what waited for it may go on.
    func storeDidClear()
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

    /// Tells every observer alive now that a clear begins; the notice tells them it ended.
    func clearBegins() -> ClearNotice {
        let observers = observers.withLock { $0.compactMap(\.observer) }  // released after unlocking
        for observer in observers { observer.storeWillClear() }
        return ClearNotice(observers: observers)
    }
}

/// The observers told that a clear began, to tell that it ended.
struct ClearNotice {
    fileprivate let observers: [any StoreClearObserver]

    /// Tells the observers that the clear ended.
    func clearEnded() {
        for observer in observers { observer.storeDidClear() }
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
