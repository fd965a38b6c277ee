import Foundation
import Loading

/// An entity in the benchmarks' lists: an id and a version each edit raises.
private struct Member: Identifiable, Equatable, Sendable {
    let id: Int
    var version: Int
}

/// Scenarios 24a–c: one edit of an entity that `holders` keys hold (each a list of it and one member of its own, each
/// observed), against rewriting the same lists by hand: a dictionary of lists under a lock, an index of the keys
/// holding each id, each list rewritten and its observer told; and against the same store without entities, each list
/// rewritten by hand with `Store.update`.
func entityEditScenario(label: String, holders: Int, edits: Int, countedEdits: Int? = nil) -> Scenario {
    let shared = 0
    let sum = Tally()
    let onList: @Sendable ([Member]) -> Void = opaqueFunction { list in
        sum.value &+= list.first { $0.id == shared }?.version ?? 0
    }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let lock = NSLock()
    let handWritten = Variant(name: "lists rewritten by hand, under a lock") { count in
        var lists: [Int: [Member]] = [:]
        var holding: [Int: [Int]] = [:]
        for key in 0..<holders {
            lists[key] = [Member(id: shared, version: 0), Member(id: key + 1, version: 0)]
            holding[shared, default: []].append(key)
        }
        for index in 0..<count {
            let edited = Member(id: shared, version: index)
            var changed: [[Member]] = []
            lock.lock()
            for key in holding[edited.id] ?? [] {
                guard var list = lists[key], let position = list.firstIndex(where: { $0.id == edited.id }) else {
                    continue
                }
                list[position] = edited
                lists[key] = list
                changed.append(list)
            }
            lock.unlock()
            for list in changed { onList(list) }
        }
        return checksum()
    }
    /// The store of the lists, sharing `members` when given, each list read and observed.
    func observedLists(sharing members: SharedEntities<Member>?) -> (Store<Int, [Member]>, [StreamSubscription]) {
        let levels: [StoreLevel<Int, [Member]>] = [.cache(MemoryCache(), name: "memory")]
        let fetch = LoaderFamily { (key: Int) in
            AnyLoader<[Member]> { completion in
                completion(.success([Member(id: shared, version: 0), Member(id: key + 1, version: 0)]))
                return NoToken()
            }
        }
        let store =
            if let members {
                Store(levels: levels, fetch: fetch, entities: members.held(in: .elements))
            } else {
                Store(levels: levels, fetch: fetch)
            }
        for key in 0..<holders { store.read(key).load { _ in } }
        let subscriptions = (0..<holders).map { key in
            store.changes(for: key).sink { response in onList(response.value ?? []) }
        }
        return (store, subscriptions)
    }
    // The same store without entities, each list holding the entity rewritten by hand with `Store.update`: what the
    // store's own change of a key costs, which the entities' edit makes once per key.
    let storeUpdates = Variant(name: "Store.update of each list holding it, by hand") { count in
        let (store, subscriptions) = observedLists(sharing: nil)
        let holding = Array(0..<holders)
        for index in 0..<count {
            let edited = Member(id: shared, version: index)
            for key in holding {
                store.update(key) { list in
                    guard var list, let position = list.firstIndex(where: { $0.id == edited.id }) else { return list }
                    list[position] = edited
                    return list
                }
            }
        }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    let entities = Variant(name: "SharedEntities.update, every key observed") { count in
        let members = SharedEntities<Member>()
        let (store, subscriptions) = observedLists(sharing: members)
        withExtendedLifetime(store) {  // the entities hold the store weakly
            for index in 0..<count { members.update(Member(id: shared, version: index)) }
        }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    return Scenario(
        title: "24\(label). An edit of an entity held by \(holders) observed \(holders == 1 ? "key" : "keys")",
        unit: "edits", operations: edits, reference: "lists rewritten by hand, under a lock",
        variants: [handWritten, storeUpdates, entities],
        expectedChecksum: { count in holders &* (count &* (count &- 1) / 2) },
        note: "each key's list rewritten once per edit and its observer told once", countedOperations: countedEdits)
}

/// 27. What attaching entities costs a store whose reads and writes change no entity another key holds: the first
/// read of a key (a memory miss, then the fetch of a list of two members of its own) and a write of a key's list with
/// the members it holds already (a refresh that brings the same), beside the same store without entities.
func entityOverheadScenario(operations: Int) -> Scenario {
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let list: @Sendable (Int) -> [Member] = { key in
        [Member(id: 2 * key, version: 0), Member(id: 2 * key + 1, version: 0)]
    }
    func makeStore(entities: Bool) -> Store<Int, [Member]> {
        let fetch = LoaderFamily { (key: Int) in
            AnyLoader<[Member]> { completion in
                completion(.success(list(key)))
                return NoToken()
            }
        }
        let levels: [StoreLevel<Int, [Member]>] = [.cache(MemoryCache(countLimit: 100_000), name: "memory")]
        guard entities else { return Store(levels: levels, fetch: fetch) }
        return Store(levels: levels, fetch: fetch, entities: SharedEntities<Member>().held(in: .elements))
    }
    func firstReads(entities: Bool) -> Variant {
        Variant(name: "Store.read, first read of a key, \(entities ? "entities attached" : "no entities")") { count in
            let store = makeStore(entities: entities)
            for key in 0..<count {
                _ = store.read(key).load { result in add(key % 100 + ((try? result.get())?.value?.count ?? 0) - 2) }
            }
            return checksum()
        }
    }
    func writes(entities: Bool) -> Variant {
        Variant(name: "Store.write of the list a key holds, \(entities ? "entities attached" : "no entities")") {
            count in
            let store = makeStore(entities: entities)
            for key in 0..<100 { store.read(key).load { _ in } }
            for index in 0..<count {
                store.write(list(index % 100), for: index % 100)
                add(index % 100)
            }
            return checksum()
        }
    }
    return Scenario(
        title: "27. A store with entities attached, reads and writes that change no shared entity",
        unit: "operations", operations: operations, reference: "Store.read, first read of a key, no entities",
        variants: [
            firstReads(entities: false), firstReads(entities: true), writes(entities: false), writes(entities: true),
        ],
        targets: [
            .instructions(
                "Store.read, first read of a key, entities attached", atMost: 1.3,
                of: "Store.read, first read of a key, no entities",
                label: "store with entities attached: first read, instructions vs the same store without"),
            .instructions(
                "Store.write of the list a key holds, entities attached", atMost: 1.3,
                of: "Store.write of the list a key holds, no entities",
                label: "store with entities attached: a write that changes no entity, vs the same store without"),
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        note: "each key's list holds two members of its own; the write brings the members the key holds")
}
