/// A key of a store sharing entities: the store's number in its ``SharedEntities`` and the key as the store's core
/// holds it (the object its face made of it and its hash value), so that the entities follow keys without knowing
/// their type. The same object is the same key; another object is asked (the store let go of the key and made it
/// again).
struct HeldKey: Hashable, Sendable {
    let store: Int
    let object: AnyStoreKey
    let hash: Int

    static func == (lhs: HeldKey, rhs: HeldKey) -> Bool {
        guard lhs.store == rhs.store, lhs.hash == rhs.hash else { return false }
        return lhs.object === rhs.object || lhs.ref.isSameKey(as: rhs.object)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(store)
        hasher.combine(hash)
    }

    /// The key as its store's core names it.
    var ref: StoreKeyRef { StoreKeyRef(object: object, hash: hash) }
}

/// What ``EntityTable/confirm(_:_:changed:replaced:of:whole:known:)`` decided under the lock.
struct Confirming {
    /// Whether only the part of the value that changed was judged (a key followed, that learned its value).
    var windowed = false
    /// The candidates (indices in the value) that have a copy to compare with, and the versions of those copies.
    var compared: [Int] = []
    var versions: [Int] = []
    /// The latest version of a copy, once confirmed.
    var since = 0
    /// What was let go of, for the caller to release after unlocking.
    var released: [Any] = []
}

/// What ``EntityTable/take(_:version:)`` took: the keys holding the entity, the copy it replaced (to release after
/// unlocking) and the latest version of a copy. Not generic, so that a live update looks up no type made of the
/// entity's to carry it.
struct TakenCopy {
    let holders: [HeldKey]
    let released: Any
    let since: Int
}

/// What a ``SharedEntities`` knows, under its lock: the latest copy of each entity some key holds, in the slot the
/// ``EntityIndex`` gives it, which keeps the rest (versions, holders, the order of use) in code that does not depend
/// on the entity's type. Comparing copies is the caller's work, outside the lock: the table only stores and counts.
struct EntityTable<Entity: Identifiable & Sendable>: Sendable where Entity.ID: Sendable {
    /// What ``take(_:versions:)`` took.
    struct Taken {
        /// The ids of the copies taken in place of older ones, and the keys holding them.
        var spread: [Entity.ID] = []
        var holders = Set<HeldKey>()
        /// Whether a copy was taken, and whether one was not (another came since it was read).
        var took = false
        var missed = false
        var released: [Entity] = []
        /// The latest version of a copy, once taken.
        var since = 0
    }

    /// Each slot's copy.
    private var copies: [Entity] = []
    private var index: EntityIndex

    init(keptKeys: Int) {
        index = EntityIndex(keptKeys: keptKeys)
    }

    /// The number of keys followed.
    var keyCount: Int { index.keyCount }

    /// A number for a new store sharing the entities.
    mutating func addStore() -> Int {
        index.addStore()
    }

    private func slot(of id: Entity.ID) -> Int? {
        index.slot(hash: id.hashValue) { copies[$0].id == id }
    }

    /// The copy of `id` known.
    func copy(of id: Entity.ID) -> Entity? {
        slot(of: id).map { copies[$0] }
    }

    /// The version of the copy of `id` known.
    func version(of id: Entity.ID) -> Int? {
        slot(of: id).map { index.version(of: $0) }
    }

    /// The copy of `id` known, and its version in `version`.
    func copy(of id: Entity.ID, version: inout Int) -> Entity? {
        guard let slot = slot(of: id) else { return nil }
        version = index.version(of: slot)
        return copies[slot]
    }

    /// The keys holding `id`.
    func holders(of id: Entity.ID) -> Set<HeldKey> {
        slot(of: id).map { index.holders(of: $0) } ?? []
    }

    /// Notes that `key`, followed, was confirmed without a change of the entities it holds: it becomes the most
    /// recently confirmed. `false` when it is not followed (nothing is noted). What it let go of is added to
    /// `released`, to release after unlocking.
    mutating func touch(_ key: HeldKey, releasing released: inout [Any]) -> Bool {
        index.touch(key, releasing: &released)
    }

    /// ``touch(_:releasing:)`` when no copy has been taken since the latest version was `since`; `false` otherwise
    /// (nothing is noted).
    mutating func touch(_ key: HeldKey, ifNoCopySince since: Int, releasing released: inout [Any]) -> Bool {
        index.latestVersion == since && index.touch(key, releasing: &released)
    }

    /// Notes that `key` holds the entities of `value` now, and takes at once the copies of the entities no key holds
    /// yet (there is nothing to compare them with). When the key is followed and `changed` is given (the part of the
    /// value that changed, replacing the part `replaced` of the previous value), only that part is noted and judged;
    /// otherwise the whole value. Returns the candidates to compare with the copies known, which it adds to
    /// `known`.
    mutating func confirm(
        _ key: HeldKey, _ value: [Entity], changed: Range<Int>, replaced: Range<Int>, of previous: [Entity],
        whole: Bool, known: inout [Entity]
    ) -> Confirming {
        var confirming = Confirming()
        let windowed = !whole && index.follows(key)
        let candidates = windowed ? changed : 0..<value.count
        var holding: [Int] = []
        holding.reserveCapacity(candidates.count)
        for position in candidates {
            let id = value[position].id
            let hash = id.hashValue
            if let slot = index.slot(hash: hash, where: { copies[$0].id == id }) {
                holding.append(slot)
                confirming.compared.append(position)
                known.append(copies[slot])
                confirming.versions.append(index.version(of: slot))
            } else {
                holding.append(index.newSlot(hash: hash))
                copies.append(value[position])
            }
        }
        var noted: EntityIndex.Noted
        if windowed {
            var removing: [Int] = []
            for position in replaced {
                if let slot = slot(of: previous[position].id) { removing.append(slot) }
            }
            if removing == holding {
                // An edit of entities the key holds already (the common change) only moves the key in the order.
                noted = EntityIndex.Noted()
                _ = index.touch(key, releasing: &noted.released)
            } else {
                noted = index.note(key, adding: holding, removing: removing)
            }
        } else {
            noted = index.note(key, holds: holding)
        }
        confirming.windowed = windowed
        confirming.since = index.latestVersion
        forget(noted.freed, into: &noted.released)
        confirming.released = noted.released
        return confirming
    }

    /// Takes each copy of `taking` as the latest of its id when the copy known is still the version `versions`
    /// gives.
    mutating func take(_ taking: [Entity], versions: [Int]) -> Taken {
        var taken = Taken()
        for position in taking.indices {
            let entity = taking[position]
            let id = entity.id
            guard let slot = slot(of: id), index.version(of: slot) == versions[position] else {
                taken.missed = true
                continue
            }
            index.renew(slot)
            taken.released.append(copies[slot])
            copies[slot] = entity
            taken.took = true
            taken.spread.append(id)
            index.addHolders(of: slot, to: &taken.holders)
        }
        taken.since = index.latestVersion
        return taken
    }

    /// Takes `entity` as the latest copy of its id when the copy known is still at `version` (a live update); `nil`
    /// when another copy came since.
    mutating func take(_ entity: Entity, version: Int) -> TakenCopy? {
        guard let slot = slot(of: entity.id), index.version(of: slot) == version else { return nil }
        index.renew(slot)
        let released = exchange(&copies[slot], with: entity)
        return TakenCopy(holders: index.holderList(of: slot), released: released, since: index.latestVersion)
    }

    /// Forgets the keys of store `store` (a clear), and the entities no other key holds.
    mutating func forget(store: Int) -> [Any] {
        var noted = index.forget(store: store)
        if noted.emptied {
            noted.released.append(exchange(&copies, with: []))
        } else {
            forget(noted.freed, into: &noted.released)
        }
        return noted.released
    }

    /// Forgets the copies of the slots the index freed, moving the last copy into each as the index did.
    private mutating func forget(_ freed: [Int], into released: inout [Any]) {
        for slot in freed {
            copies.swapAt(slot, copies.count - 1)
            released.append(copies.removeLast())
        }
    }
}
