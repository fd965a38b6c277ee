#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreLevel {
    /// This level, appending to `journal` each save, removal and emptying of it that succeeded, for the other
    /// processes sharing the level to learn: a key as `encodeKey` encodes it (a key it cannot encode is not
    /// recorded). A change is recorded once the level holds it, so a process that reads the level on learning it finds
    /// it there. A failed append is given to `onFailure` (the level's change stands; the others do not hear of it).
    func journaling(
        to journal: ChangeJournal, encodeKey: @escaping @Sendable (Key) -> Data?,
        onFailure: @escaping @Sendable (any Error) -> Void
    ) -> StoreLevel {
        let level = boxed
        @Sendable func record(_ change: ChangeJournal.Change?) {
            guard let change else { return }
            do { try journal.append(change) } catch { onFailure(error) }
        }
        return StoreLevel(
            name: name,
            boxed: BoxedLevel(
                read: level.read,
                save: { value, savedAt, key, completion in
                    level.save(value, savedAt, key) { result in
                        if case .success = result { record(encodeKey(StoreKey<Key>.key(of: key)).map { .saved($0) }) }
                        completion(result)
                    }
                },
                removeValue: { key, completion in
                    level.removeValue(key) { result in
                        if case .success = result {
                            record(encodeKey(StoreKey<Key>.key(of: key)).map { .removed($0) })
                        }
                        completion(result)
                    }
                },
                removeAll: { completion in
                    level.removeAll { result in
                        if case .success = result { record(.cleared) }
                        completion(result)
                    }
                },
                writeDebounce: level.writeDebounce, scheduler: level.scheduler))
    }
}
