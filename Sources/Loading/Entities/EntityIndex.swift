/// The part of what a ``SharedEntities`` knows that does not depend on the entity's type: entities known by slots
/// (`0..<count`, numbers the index gives them), found by the hash value of their id and recognized by the caller's
/// comparison; the version of each slot's copy, the keys holding each slot, the slots each key holds, and the keys in
/// the order they were last confirmed (past `keptKeys`, the oldest is forgotten). A slot no key holds any more is
/// freed at the end of the note that let go of it: the last slot moves into it, so that slots stay dense, and the
/// caller, told each freed slot in order, moves its copies the same way.
struct EntityIndex: Sendable {
    /// What a note let go of: values to release after unlocking (a key's deinitializer is the app's code), and the
    /// slots freed, in the order they were (each filled with the last slot, or the last itself); `emptied` when
    /// every slot was.
    struct Noted {
        var released: [Any] = []
        var freed: [Int] = []
        var emptied = false
    }

    /// A key followed, in its place among the keys (`keys` gives it): the slots it holds, and its neighbours in the
    /// order of use (-1: none), a chain from `oldest` to `newest`.
    private struct Holding {
        var key: HeldKey?
        var slots = HeldSlots()
        var older = -1
        var newer = -1
    }

    private var versions: [Int] = []
    private var holders: [Holders] = []
    /// The slots, found by the hash value of their entity's id.
    private var chains = HashChains()
    private var versionCount = 0
    private var keys: [HeldKey: Int] = [:]
    private var holdings: [Holding] = []
    private var freeHoldings: [Int] = []
    private var oldest = -1
    private var newest = -1
    private let keptKeys: Int
    private var stores = 0

    init(keptKeys: Int) {
        self.keptKeys = max(1, keptKeys)
    }

    /// The number of keys followed.
    var keyCount: Int { keys.count }

    /// The number of slots.
    var count: Int { versions.count }

    /// A number for a new store sharing the entities.
    mutating func addStore() -> Int {
        stores += 1
        return stores
    }

    /// The slot of the entity whose id has `hash` and that `isEntity` recognizes, if it has one.
    func slot(hash: Int, where isEntity: (Int) -> Bool) -> Int? {
        chains.slot(hash: hash, where: isEntity)
    }

    /// A slot (the next one, `count`) for an entity whose id has `hash` and that no key holds yet, its copy at a new
    /// version; held by no key until a note says so.
    mutating func newSlot(hash: Int) -> Int {
        versionCount += 1
        versions.append(versionCount)
        holders.append(Holders())
        let slot = chains.addSlot()
        chains.link(slot, hash: hash)
        return slot
    }

    /// The latest version given to a copy: it changes whenever a copy is taken, or an entity is first known.
    var latestVersion: Int { versionCount }

    /// The version of `slot`'s copy.
    func version(of slot: Int) -> Int {
        versions[slot]
    }

    /// Gives `slot`'s copy a new version (a newer copy was taken).
    mutating func renew(_ slot: Int) {
        versionCount += 1
        versions[slot] = versionCount
    }

    /// The keys holding `slot`.
    func holders(of slot: Int) -> Set<HeldKey> {
        var keys = Set<HeldKey>()
        holders[slot].add(to: &keys)
        return keys
    }

    /// The keys holding `slot`, each once, in a list (no set is made).
    func holderList(of slot: Int) -> [HeldKey] {
        var keys: [HeldKey] = []
        keys.reserveCapacity(holders[slot].count)
        keys.append(contentsOf: holders[slot])
        return keys
    }

    /// Adds the keys holding `slot` to `keys`.
    func addHolders(of slot: Int, to keys: inout Set<HeldKey>) {
        holders[slot].add(to: &keys)
    }

    /// Whether the entities `key` holds are followed.
    func follows(_ key: HeldKey) -> Bool {
        keys[key] != nil
    }

    /// Makes `key`, followed, the most recently confirmed; `false` when it is not followed. What it let go of (the
    /// key's previous object) is added to `released`.
    mutating func touch(_ key: HeldKey, releasing released: inout [Any]) -> Bool {
        guard let place = place(of: key, releasing: &released) else { return false }
        makeNewest(place)
        return true
    }

    /// Notes that a followed `key` now holds the slots of the places `adding` and no longer those of the places
    /// `removing` (a slot the key holds in another place too stays held), as the most recently confirmed key.
    mutating func note(_ key: HeldKey, adding: [Int], removing: [Int]) -> Noted {
        var noted = Noted()
        guard let place = place(of: key, releasing: &noted.released) else { return noted }
        // Added first, so that a slot both added and removed is never let go of.
        for slot in adding where holdings[place].slots.add(slot) { holders[slot].insert(key) }
        for slot in removing where holdings[place].slots.remove(slot) { drop(key, from: slot, into: &noted) }
        if holdings[place].slots.isEmpty {
            noted.released.append(unfollow(place))
        } else {
            makeNewest(place)
        }
        compact(&noted)
        return noted
    }

    /// Notes that `key` holds the slots of the places `list` now (none: it is forgotten), as the most recently
    /// confirmed key, and lets go of the keys past the bound.
    mutating func note(_ key: HeldKey, holds list: consuming [Int]) -> Noted {
        var noted = Noted()
        let slots = HeldSlots(list)
        var before: HeldSlots?
        if let place = place(of: key, releasing: &noted.released) {
            before = holdings[place].slots
            if slots.isEmpty {
                noted.released.append(unfollow(place))
            } else {
                holdings[place].slots = slots
                makeNewest(place)
            }
        } else if !slots.isEmpty {
            follow(key, holding: slots)
        }
        if before != slots {
            for slot in slots where before?.contains(slot) != true { holders[slot].insert(key) }
            // Only the slots the key no longer holds lose it (a copy it still holds stays known).
            for slot in before ?? HeldSlots() where !slots.contains(slot) { drop(key, from: slot, into: &noted) }
        }
        while keys.count > keptKeys {
            let forgotten = holdings[oldest]
            noted.released.append(unfollow(oldest))
            for slot in forgotten.slots { drop(forgotten.key!, from: slot, into: &noted) }
        }
        compact(&noted)
        return noted
    }

    /// Forgets the keys of store `store` (a clear), and the slots no other key holds.
    mutating func forget(store: Int) -> Noted {
        var noted = Noted()
        if keys.keys.allSatisfy({ $0.store == store }) {
            // Every key is the store's (the common case: one store shares the entities): all goes at once.
            noted.released = [keys, holdings, holders]
            (keys, holdings, freeHoldings, oldest, newest) = ([:], [], [], -1, -1)
            (versions, holders) = ([], [])
            chains.removeAll()
            noted.emptied = true
            return noted
        }
        for (key, place) in keys.filter({ $0.key.store == store }) {
            let forgotten = holdings[place]
            noted.released.append(unfollow(place))
            for slot in forgotten.slots { drop(key, from: slot, into: &noted) }
        }
        compact(&noted)
        return noted
    }

    /// The place of `key` among the keys followed, if it is followed. A key its store made again (it let go of it
    /// meanwhile) is followed by the object the store names it with now, `key`'s, from then on: the store finds it by
    /// that object at once, without asking the key. The previous object is added to `released`.
    private mutating func place(of key: HeldKey, releasing released: inout [Any]) -> Int? {
        guard let found = keys.index(forKey: key) else { return nil }
        let (old, place) = keys[found]
        guard old.object !== key.object else { return place }
        keys.remove(at: found)
        keys[key] = place
        holdings[place].key = key
        for slot in holdings[place].slots { holders[slot].replace(old, with: key) }
        released.append(old)
        return place
    }

    /// Follows `key`, holding `slots`, as the most recently confirmed.
    private mutating func follow(_ key: HeldKey, holding slots: HeldSlots) {
        let place = freeHoldings.popLast() ?? holdings.count
        if place == holdings.count { holdings.append(Holding()) }
        holdings[place] = Holding(key: key, slots: slots)
        keys[key] = place
        linkNewest(place)
    }

    /// Stops following the key at `place`; returns what it held, to release after unlocking.
    private mutating func unfollow(_ place: Int) -> Any {
        unlinkOrder(place)
        let gone = holdings[place]
        holdings[place] = Holding()
        freeHoldings.append(place)
        return (gone, keys.removeValue(forKey: gone.key!)) as Any
    }

    private mutating func makeNewest(_ place: Int) {
        guard place != newest else { return }
        unlinkOrder(place)
        linkNewest(place)
    }

    private mutating func unlinkOrder(_ place: Int) {
        let (older, newer) = (holdings[place].older, holdings[place].newer)
        if older >= 0 { holdings[older].newer = newer } else { oldest = newer }
        if newer >= 0 { holdings[newer].older = older } else { newest = older }
    }

    private mutating func linkNewest(_ place: Int) {
        holdings[place].older = newest
        holdings[place].newer = -1
        if newest >= 0 { holdings[newest].newer = place } else { oldest = place }
        newest = place
    }

    /// Takes `key` off the holders of `slot`, noting the slot freed when no key holds it any more.
    private mutating func drop(_ key: HeldKey, from slot: Int, into noted: inout Noted) {
        if let gone = holders[slot].remove(key) { noted.released.append(gone) }
        if holders[slot].isEmpty { noted.freed.append(slot) }
    }

    /// Frees the slots noted, the highest first, each filled with the last slot (whose keys then hold it there).
    private mutating func compact(_ noted: inout Noted) {
        guard !noted.freed.isEmpty else { return }
        noted.freed.sort(by: >)
        for slot in noted.freed {
            chains.unlink(slot)
            let last = count - 1
            if slot != last {
                chains.unlink(last)
                versions[slot] = versions[last]
                holders[slot] = holders[last]
                chains.link(slot, hash: chains.hash(of: last))
                for key in holders[slot] {
                    guard let place = keys[key] else { continue }
                    holdings[place].slots.move(last, to: slot)
                }
            }
            versions.removeLast()
            holders.removeLast()
            chains.removeLastSlot()
        }
    }
}

/// The slots one key holds, in increasing order, each as many times as the key's value holds its entity (a list may
/// hold one entity in two places): the key holds a slot while one place does. A key holds few entities, mostly, and a
/// sorted array makes, compares and searches them without hashing or a table of its own.
private struct HeldSlots: Sendable, Equatable, Sequence {
    private var places: [Int] = []

    init() {}

    /// The slots of the places of `list`.
    init(_ list: consuming [Int]) {
        places = list
        places.sort()
    }

    var isEmpty: Bool { places.isEmpty }

    struct Iterator: IteratorProtocol {
        fileprivate let places: [Int]
        fileprivate var index = 0

        /// The next slot held, once however many places hold it.
        mutating func next() -> Int? {
            guard index < places.count else { return nil }
            let slot = places[index]
            repeat { index += 1 } while index < places.count && places[index] == slot
            return slot
        }
    }

    /// The slots held, each once.
    func makeIterator() -> Iterator { Iterator(places: places) }

    func contains(_ slot: Int) -> Bool {
        let index = position(of: slot)
        return index < places.count && places[index] == slot
    }

    /// Adds a place of `slot`; `true` when it is the slot's first.
    mutating func add(_ slot: Int) -> Bool {
        let index = position(of: slot)
        let first = index == places.count || places[index] != slot
        places.insert(slot, at: index)
        return first
    }

    /// Removes a place of `slot`; `true` when it was the slot's last.
    mutating func remove(_ slot: Int) -> Bool {
        let index = position(of: slot)
        guard index < places.count, places[index] == slot else { return false }
        places.remove(at: index)
        return index == places.count || places[index] != slot
    }

    /// Moves the places of slot `old` to slot `new`, which the key does not hold.
    mutating func move(_ old: Int, to new: Int) {
        var count = 0
        while contains(old) {
            _ = remove(old)
            count += 1
        }
        for _ in 0..<count { _ = add(new) }
    }

    /// The first place of `slot`, or where it would be added.
    private func position(of slot: Int) -> Int {
        var (low, high) = (0, places.count)
        while low < high {
            let middle = (low + high) / 2
            if places[middle] < slot { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// The keys holding one slot: the first inline (most entities are held by one key), the others in a set.
private struct Holders: Sendable, Sequence {
    private var first: HeldKey?
    private var others: Set<HeldKey> = []

    var isEmpty: Bool { first == nil }

    var count: Int { first == nil ? 0 : 1 + others.count }

    struct Iterator: IteratorProtocol {
        fileprivate var first: HeldKey?
        fileprivate var others: Set<HeldKey>.Iterator

        mutating func next() -> HeldKey? { first.take() ?? others.next() }
    }

    /// The keys, the first one first.
    func makeIterator() -> Iterator { Iterator(first: first, others: others.makeIterator()) }

    func add(to keys: inout Set<HeldKey>) {
        guard let first else { return }
        keys.insert(first)
        keys.formUnion(others)
    }

    mutating func insert(_ key: HeldKey) {
        guard let first else {
            first = key
            return
        }
        if first != key { others.insert(key) }
    }

    /// Puts `new` in the place of `old` (the same key, named by another object).
    mutating func replace(_ old: HeldKey, with new: HeldKey) {
        if first == old {
            first = new
        } else if others.remove(old) != nil {
            others.insert(new)
        }
    }

    /// Removes `key`; returns it as it was kept, to release.
    mutating func remove(_ key: HeldKey) -> HeldKey? {
        guard let kept = first else { return nil }
        guard kept == key else { return others.remove(key) }
        first = others.popFirst()
        return kept
    }
}
