#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Follows the changes other processes record in `journal` for the level at `sharedLevel`, which they share with
    /// this store: every `polling`, what they saved or removed is read from that level and shown, and what they
    /// emptied is forgotten, in this store and its faster levels (never written back to the shared level). Polls
    /// until the returned token is cancelled or the store is released.
    func followChanges(
        in journal: ChangeJournal, sharedLevel: Int, decodeKey: @escaping @Sendable (Data) -> Key?,
        polling: Duration
    ) -> any CancellationToken {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: polling)
                guard let store = self else { return }
                store.learn(journal.readChanges(), sharedLevel: sharedLevel, decodeKey: decodeKey)
            }
        }
        return AnyCancellationToken { task.cancel() }
    }

    /// Applies what other processes changed in the shared level, in the order they changed it.
    func learn(_ changes: [ChangeJournal.Change], sharedLevel: Int, decodeKey: (Data) -> Key?) {
        for change in changes {
            switch change {
            case .saved(let encoded), .removed(let encoded):
                guard let key = decodeKey(encoded) else { continue }
                clearObservers.tellAnotherProcessChanged(key)
                engine.learnExternalChange(
                    of: StoreKeyRef(object: StoreKey(key), hash: key.hashValue), level: sharedLevel)
            case .cleared:
                engine.perform(locked { $0.clear(levels: sharedLevel, completion: {}) }, for: nil)
                engine.confirmations?.cleared()
            case .missed:
                // Anything may have changed: the faster levels let go of what they hold, and every key the store
                // holds is read again.
                for level in engine.levels[..<sharedLevel] { level.removeAll { _ in } }
                for key in lockedKeys({ $0.entries.keys }) {
                    engine.learnExternalChange(
                        of: StoreKeyRef(object: StoreKey(key), hash: key.hashValue), level: sharedLevel)
                }
            }
        }
    }
}
