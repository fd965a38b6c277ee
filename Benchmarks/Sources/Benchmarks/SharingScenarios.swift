import Foundation
import Loading

/// 26. A write to an observed key of a store whose second level other processes share (an app and its extension),
/// recorded in the change journal, beside the same store with no level shared: what sharing adds to a write. Both
/// stores hold a memory level and a second memory level (named "shared"); string keys, as most stores have. The
/// journal is polled once an hour, so that no poll lands in a count.
func sharedWriteScenario(writes: Int, folder: URL) -> Scenario {
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let keys = (0..<100).map { "friend-\($0)" }
    let fetch = LoaderFamily { (_: String) in ImmediateLoader(result: .success(0)) }
    func makeStore(sharing: ProcessSharing<String>?) -> Store<String, Int> {
        let levels: [StoreLevel<String, Int>] = [
            .cache(MemoryCache<String, Int>(countLimit: 1_000), name: "memory"),
            .cache(MemoryCache<String, Int>(countLimit: 1_000), name: "shared"),
        ]
        return Store(levels: levels, fetch: fetch, sharing: sharing)
    }
    func write(to store: Store<String, Int>, _ count: Int) -> Int {
        let observer = store.changes(for: keys[0]).sink { response in add(response.value ?? 0) }
        // The observer is told of its own key's writes, and of its first value; the checksum counts the writes.
        sum.value = 0
        for index in 0..<count {
            store.write(index % 100, for: keys[0])
        }
        observer.cancel()
        return checksum()
    }
    let unshared = Variant(name: "Store.write, observed, no level shared") { count in
        write(to: makeStore(sharing: nil), count)
    }
    let shared = Variant(name: "Store.write, observed, a level shared through a journal") { count in
        let file = folder.appendingPathComponent("journal-\(UUID().uuidString)")
        let sharing = try! ProcessSharing<String>.journal(at: file, sharedLevel: "shared", polling: .seconds(3_600))
        return write(to: makeStore(sharing: sharing), count)
    }
    return Scenario(
        title: "26. A write of a store sharing a level with other processes",
        unit: "writes", operations: writes, reference: "Store.write, observed, no level shared",
        variants: [unshared, shared],
        targets: [
            .instructions(
                "Store.write, observed, a level shared through a journal", atMost: 2,
                of: "Store.write, observed, no level shared",
                label: "store: a write with a level shared, instructions vs the same store unshared")
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        note: "the journal in a temporary folder; both stores hold two memory levels")
}
