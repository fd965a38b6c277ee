import Foundation
import Loading

/// An entity in the benchmarks' lists: an id and a version each edit raises.
private struct Member: Identifiable, Equatable, Sendable {
    let id: Int
    var version: Int
}

/// Scenarios 24a–c: one edit of an entity that `holders` keys hold (each a list of it and one member of its own, each
/// observed), against rewriting the same lists by hand: a dictionary of lists under a lock, an index of the keys
/// holding each id, each list rewritten and its observer told.
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
    let entities = Variant(name: "SharedEntities.update, every key observed") { count in
        let members = SharedEntities<Member>()
        let store = Store<Int, [Member]>(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { key in
                AnyLoader { completion in
                    completion(.success([Member(id: shared, version: 0), Member(id: key + 1, version: 0)]))
                    return NoToken()
                }
            },
            entities: members.held(in: .elements))
        for key in 0..<holders { store.read(key).load { _ in } }
        let subscriptions = (0..<holders).map { key in
            store.changes(for: key).sink { response in onList(response.value ?? []) }
        }
        for index in 0..<count { members.update(Member(id: shared, version: index)) }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    return Scenario(
        title: "24\(label). An edit of an entity held by \(holders) observed \(holders == 1 ? "key" : "keys")",
        unit: "edits", operations: edits, reference: "lists rewritten by hand, under a lock",
        variants: [handWritten, entities],
        expectedChecksum: { count in holders &* (count &* (count &- 1) / 2) },
        note: "each key's list rewritten once per edit and its observer told once", countedOperations: countedEdits)
}
