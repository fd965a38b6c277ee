/// A key of a store sharing entities: the store's number in its ``SharedEntities`` and the key.
struct HeldKey: Hashable, Sendable {
    let store: Int
    let key: any Hashable & Sendable

    static func == (lhs: HeldKey, rhs: HeldKey) -> Bool {
        lhs.store == rhs.store && isEqual(lhs.key, rhs.key)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(store)
        key.hash(into: &hasher)
    }
}

private func isEqual<Key: Hashable>(_ key: Key, _ other: any Hashable & Sendable) -> Bool {
    (other as? Key) == key
}

/// What a ``SharedEntities`` knows, under its lock: the latest copy of each entity some key holds (with a version
/// that grows with each new copy), the keys holding each, and the keys in the order they were last confirmed: past
/// `keptKeys`, the oldest is forgotten, and with it the entities no other key holds. Comparing copies is the
/// caller's work, outside the lock: the table only stores and counts.
struct EntityTable<Entity: Identifiable & Sendable>: Sendable where Entity.ID: Sendable {
    struct Copy: Sendable {
        let entity: Entity
        let version: Int
    }

    private var copies: [Entity.ID: Copy] = [:]
    private var holders: [Entity.ID: Set<HeldKey>] = [:]
    private var held: [HeldKey: (ids: [Entity.ID], use: Int)] = [:]
    private var recency = OrderedQueue<HeldKey>()
    private var uses = 0
    private var versions = 0
    private var stores = 0
    private let keptKeys: Int

    init(keptKeys: Int) {
        self.keptKeys = max(1, keptKeys)
    }

    /// The number of keys followed.
    var keyCount: Int { held.count }
    /// The number of entities known.
    var entityCount: Int { copies.count }

    /// A number for a new store sharing the entities.
    mutating func addStore() -> Int {
        stores += 1
        return stores
    }

    func copy(of id: Entity.ID) -> Copy? {
        copies[id]
    }

    /// The keys holding `id`.
    func holders(of id: Entity.ID) -> Set<HeldKey> {
        holders[id] ?? []
    }

    /// Notes that `key` holds the entities `ids` now (none: it is forgotten), as the most recently confirmed key;
    /// returns what was let go of (keys past the bound, copies no key holds), for the caller to release after
    /// unlocking: a key's or an entity's deinitializer is the caller's code.
    mutating func note(_ key: HeldKey, holds ids: [Entity.ID]) -> [Any] {
        var released: [Any] = []
        if let before = held[key], before.ids == ids {
            // The same entities as before (an edit of one of them): only the order of use changes.
            released.append(recency.remove(id: before.use) as Any)
            uses += 1
            held[key]!.use = uses
            recency.append(key, id: uses)
            return released
        }
        let before = held.removeValue(forKey: key)
        if let before { released.append(recency.remove(id: before.use) as Any) }
        if !ids.isEmpty {
            uses += 1
            held[key] = (ids, uses)
            recency.append(key, id: uses)
            for id in ids { holders[id, default: []].insert(key) }
        }
        if let before {
            // Only the entities the key no longer holds lose it (a copy it still holds stays known).
            let kept = Set(ids)
            released += drop(key, from: before.ids.filter { !kept.contains($0) })
            released.append(before.ids)
        }
        while held.count > keptKeys, let oldest = recency.popFirst() {
            released.append(oldest.element)
            if let forgotten = held.removeValue(forKey: oldest.element) {
                released += drop(oldest.element, from: forgotten.ids)
                released.append(forgotten.ids)
            }
        }
        return released
    }

    /// Takes `entity` as the latest copy of its id, when the copy known is still version `known` (`nil`: none was
    /// known); `false` when another copy came since.
    mutating func take(_ entity: Entity, ifStill known: Int?) -> (taken: Bool, released: Copy?) {
        guard copies[entity.id]?.version == known else { return (false, nil) }
        versions += 1
        return (true, copies.updateValue(Copy(entity: entity, version: versions), forKey: entity.id))
    }

    /// Forgets the keys of store `store` (a clear), and the entities no other key holds.
    mutating func forget(store: Int) -> [Any] {
        var released: [Any] = []
        for key in held.keys.filter({ $0.store == store }) {
            if let forgotten = held.removeValue(forKey: key) {
                released.append(recency.remove(id: forgotten.use) as Any)
                released += drop(key, from: forgotten.ids)
                released.append(forgotten.ids)
            }
            released.append(key)
        }
        return released
    }

    /// Takes `key` off the holders of `ids`, forgetting the copies no key holds any more.
    private mutating func drop(_ key: HeldKey, from ids: [Entity.ID]) -> [Any] {
        var released: [Any] = []
        for id in ids {
            guard var keys = holders[id] else { continue }
            keys.remove(key)
            if keys.isEmpty {
                holders[id] = nil
                if let copy = copies.removeValue(forKey: id) { released.append(copy) }
            } else {
                holders[id] = keys
            }
        }
        return released
    }
}
