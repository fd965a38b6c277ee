#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreLevel {
    /// This level, appending to `journal` each save, removal and emptying of it that succeeded, with its place in
    /// the processes' order, for the other processes sharing the level to learn: a key as `encodeKey` encodes it (a
    /// key it cannot encode is not recorded). A change is recorded once the level holds it, so a process that reads
    /// the level on learning it finds it there. A failed append is given to `onFailure` (the level's change stands;
    /// the others do not hear of it). Returns the level and what keeps its changes in order.
    func journaling(
        to journal: ChangeJournal, encodeKey: @escaping @Sendable (Key) -> Data?,
        onFailure: @escaping @Sendable (any Error) -> Void
    ) -> (level: StoreLevel, order: SharedLevelOrder) {
        let order = SharedLevelOrder(
            boxed, journal: journal, encodeKey: { encodeKey(StoreKey<Key>.key(of: $0)) }, onFailure: onFailure)
        return (StoreLevel(name: name, boxed: order.orderedLevel), order)
    }
}
