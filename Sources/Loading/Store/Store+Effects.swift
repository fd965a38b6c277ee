#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Submits a change of `key`'s confirmed value, and runs the key's queue when it was idle.
    func submit(_ job: Machine.Job, for key: Key) {
        engine.submit(job, hash: key.hashValue, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) })
    }

    @inlinable
    func startObserving(_ key: Key) -> ResponseSubject {
        engine.startObserving(hash: key.hashValue, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) })
    }

    /// Counts a state observer of `key`, and shows it the key's state now.
    func startObservingStates(_ key: Key) -> Machine.StateSubject {
        let (subject, now) =
            locked(key) { $0.observeStates($1, fresh: nil) }
            ?? locked(key) { $0.observeStates($1, fresh: Machine.StateSubject(nil)) }!
        engine.publish(now)
        return subject
    }

    func stopObservingStates(_ key: Key) {
        let subject = locked(key) { $0.stopObservingStates($1) }
        withExtendedLifetime(subject) {}  // released after unlocking
    }

    @inlinable
    func stopObserving(_ key: Key) {
        engine.stopObserving(hash: key.hashValue, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) })
    }
}
