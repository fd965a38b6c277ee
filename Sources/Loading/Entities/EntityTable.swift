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
    private var held: [HeldKey: (ids: Set<Entity.ID>, use: Int)] = [:]
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

    /// Whether the entities `key` holds are followed.
    func follows(_ key: HeldKey) -> Bool {
        held[key] != nil
    }

    /// Notes that a followed `key` now holds the entities `adding` and no longer those of `removing` (ids that are in
    /// both stay), as the most recently confirmed key; `nil` when `key` is not followed (note all it holds instead).
    /// Returns what was let go of, as ``note(_:holds:)`` does.
    mutating func note(_ key: HeldKey, adding: [Entity.ID], removing: [Entity.ID]) -> [Any]? {
        guard var entry = held.removeValue(forKey: key) else { return nil }
        var released: [Any] = [recency.remove(id: entry.use) as Any]
        let added = Set(adding)
        for id in removing where !added.contains(id) {
            if let gone = entry.ids.remove(id) { released.append(gone) }
            released += drop(key, from: [id])
        }
        for id in added where entry.ids.insert(id).inserted { holders[id, default: []].insert(key) }
        guard !entry.ids.isEmpty else { return released }
        uses += 1
        entry.use = uses
        held[key] = entry
        recency.append(key, id: uses)
        return released
    }

    /// Notes that `key` holds the entities `ids` now (none: it is forgotten), as the most recently confirmed key;
    /// returns what was let go of (keys past the bound, copies no key holds), for the caller to release after
    /// unlocking: a key's or an entity's deinitializer is the caller's code.
    mutating func note(_ key: HeldKey, holds list: [Entity.ID]) -> [Any] {
        var released: [Any] = []
        let ids = Set(list)
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
            released += drop(key, from: before.ids.subtracting(ids))
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
    private mutating func drop(_ key: HeldKey, from ids: some Sequence<Entity.ID>) -> [Any] {
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
