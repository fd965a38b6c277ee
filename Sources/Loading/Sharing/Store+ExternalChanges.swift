#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a store follows of the other processes sharing a level with it: their journal (through what keeps the level's
/// changes in order), the shared level's index, and how a key is read back from the journal.
struct OtherProcesses<Key: Hashable & Sendable>: Sendable {
    let order: SharedLevelOrder
    let sharedLevel: Int
    let decodeKey: @Sendable (Data) -> Key?
}

extension Store {
    /// Follows the changes other processes record in their journal for the level they share with this store: every
    /// `polling`, what they saved or removed is read from that level and shown, and what they emptied is forgotten,
    /// in this store and its faster levels (never written back to the shared level). Polls until the returned token
    /// is cancelled or the store is released.
    func followChanges(polling: Duration) -> any CancellationToken {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: polling)
                guard let store = self else { return }
                store.learnOtherProcessesChanges()
            }
        }
        return AnyCancellationToken { task.cancel() }
    }

    /// Applies what the other processes recorded since the last look (at once, without waiting for the next poll:
    /// a mutation queue looks before it numbers a mutation, so a change made after another process's logout is the
    /// next user's). Nothing without a shared level.
    func learnOtherProcessesChanges() {
        guard let otherProcesses else { return }
        learn(otherProcesses.order.journal.readRecords(), from: otherProcesses)
    }

    /// Reads `object`'s key again from the shared level, as when another process changed it.
    func relearn(_ object: AnyStoreKey) {
        guard let otherProcesses else { return }
        let key = StoreKey<Key>.key(of: object)
        engine.learnExternalChange(
            of: StoreKeyRef(object: object, hash: key.hashValue), level: otherProcesses.sharedLevel)
    }

    /// Applies what other processes changed in the shared level, in the order their records landed: a change made
    /// before this store's latest change of the key (in the processes' order) is not shown, and this store's is saved
    /// again, as the other's may have landed after it.
    private func learn(_ records: [ChangeJournal.Record], from otherProcesses: OtherProcesses<Key>) {
        let sharedLevel = otherProcesses.sharedLevel
        // The keys to read from the level, each once, after the last of their records: a read begun while an earlier
        // one of the key is on its way would be dropped when that one's answer came first (the store would take the
        // key as changed since it began), though it read the level later (after this store removed an old user's
        // value from it again, say).
        var changed: [StoreKeyRef] = []
        var changedKeys: Set<Data> = []
        func readChanged() {
            for key in changed { engine.learnExternalChange(of: key, level: sharedLevel) }
            (changed, changedKeys) = ([], [])
        }
        defer { readChanged() }
        for record in records {
            switch record.change {
            case .saved(let encoded), .removed(let encoded):
                guard let key = otherProcesses.decodeKey(encoded) else { continue }
                clearObservers.tellAnotherProcessChanged(key)
                let object = StoreKey(key)
                let removed = if case .removed = record.change { true } else { false }
                guard otherProcesses.order.learnedChange(of: object, encoded, at: record.order, removed: removed)
                else { continue }
                otherProcesses.order.noteChangeLearned(of: object, at: record.order)
                if changedKeys.insert(encoded).inserted {
                    changed.append(StoreKeyRef(object: object, hash: key.hashValue))
                }
            case .cleared:
                readChanged()  // read before the clear, as they were learned
                // This store's changes made after the clear outlive it: read again once the clear ended (and once
                // their saves landed again, should the clear have emptied them).
                let outliving = otherProcesses.order.learnedClear(at: record.order)
                // Another process's logout: as this store's own, but for the shared level. The queues over the store
                // drop the old user's mutations first (nothing of them is sent or shown).
                let storePartEnded = clearObservers.clearBegins(storeParts: 2, ended: {})
                let order = otherProcesses.order
                order.clearBegins(at: record.order)
                let cleared: @Sendable () -> Void = { [weak self] in
                    storePartEnded()
                    // The next user's changes learned meanwhile (a read during the clear finds nothing) are read now.
                    for object in outliving + order.clearEnded() { self?.relearn(object) }
                }
                engine.clear(levels: sharedLevel, keepingChangesAfter: record.order, completion: cleared)
                engine.confirmations?.cleared()
                storePartEnded()
            case .missed:
                readChanged()
                // Anything may have changed: the faster levels let go of what they hold, and every key the store
                // holds is read again, but those this store changed (saved again: they may be the latest).
                let isClaimed = otherProcesses.order.learnedMissedChanges()
                for level in engine.levels[..<sharedLevel] { level.removeAll { _ in } }
                for key in lockedKeys({ $0.entries.keys }) where !isClaimed(StoreKey(key)) {
                    engine.learnExternalChange(
                        of: StoreKeyRef(object: StoreKey(key), hash: key.hashValue), level: sharedLevel)
                }
            }
        }
    }
}
