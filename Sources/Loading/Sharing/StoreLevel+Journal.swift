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
        let recorded: @Sendable (LevelChange) -> ChangeJournal.Change? = { change in
            switch change {
            case .save(let key): encodeKey(StoreKey<Key>.key(of: key)).map { .saved($0) }
            case .removal(let key): encodeKey(StoreKey<Key>.key(of: key)).map { .removed($0) }
            case .removalOfAll: .cleared
            }
        }
        return StoreLevel(
            name: name,
            boxed: boxed.telling { change, result in
                guard case .success = result, let record = recorded(change) else { return }
                do { try journal.append(record) } catch { onFailure(error) }
            })
    }
}
