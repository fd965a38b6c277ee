import CHeapStats
import Foundation
import Loading

/// 17. The store's cold and warm paths: the first read of a key (a miss in the memory level, then a fetch), a write
/// to an observed key, a hit, and a clear of kept keys, against a locked `Dictionary` read through (or looked up).
func storePathsScenario(operations: Int) -> Scenario {
    // Every variant adds `index % 100` per operation, through the same opaque sink.
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    let deliver: @Sendable (Result<StoreResponse<Int>, any Error>) -> Void = { result in
        add((try? result.get())?.value ?? 0)
    }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let source: @Sendable (Int) -> Int = opaqueFunction { $0 % 100 }
    let fetch = LoaderFamily { (key: Int) in ImmediateLoader(result: .success(source(key))) }
    let lock = NSLock()
    let dictionary = ResultBox<[Int: Int]>()
    let lookup = Variant(name: "locked Dictionary lookup") { count in
        dictionary.value = Dictionary(uniqueKeysWithValues: (0..<100).map { ($0, $0) })
        for index in 0..<count {
            lock.lock()
            let value = dictionary.value![index % 100]!
            lock.unlock()
            add(value)
        }
        return checksum()
    }
    let readThrough = Variant(name: "read-through into a locked Dictionary") { count in
        dictionary.value = [:]
        for key in 0..<count {
            lock.lock()
            let cached = dictionary.value![key]
            lock.unlock()
            let value = cached ?? source(key)
            if cached == nil {
                lock.lock()
                dictionary.value![key] = value
                lock.unlock()
            }
            add(value)
        }
        return checksum()
    }
    let firstRead = Variant(name: "Store.read, first read of a key") { count in
        let store = Store(levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")], fetch: fetch)
        for key in 0..<count { _ = store.read(key).load(completion: deliver) }
        return checksum()
    }
    let write = Variant(name: "Store.write, one observer, one memory level") { count in
        let store = Store(levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")], fetch: fetch)
        let observer = store.changes(for: -1).sink { response in add(response.value ?? 0) }
        for index in 0..<count { store.write(index % 100, for: -1) }
        observer.cancel()
        return checksum()
    }
    let hit = Variant(name: "Store.read hit, 100 keys") { count in
        let store = Store(
            levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")], fetch: fetch, keptValues: 100)
        for key in 0..<100 { store.write(key, for: key) }
        for index in 0..<count { _ = store.read(index % 100).load(completion: deliver) }
        return checksum()
    }
    // What a clear costs per key it drops, with its write. A clear that grew quadratically with the keys it holds
    // (each dropped key appending to a list copied whole) shows here as a count per key that grows with the keys.
    let clear = Variant(name: "Store.write of a kept key, then clear") { count in
        let store = Store<Int, Int>(levels: [], fetch: fetch)
        for key in 0..<count {
            store.write(source(key), for: key)
            add(key % 100)
        }
        precondition(store.count == count, "a store without levels keeps every value")
        store.clear()
        precondition(store.count == 0, "a clear drops every key")
        return checksum()
    }
    return Scenario(
        title: "17. Store paths: first read, observed write, hit",
        unit: "operations", operations: operations, reference: "locked Dictionary lookup",
        variants: [lookup, readThrough, firstRead, write, hit, clear],
        targets: [
            .instructions(
                "Store.read, first read of a key", atMost: 10, of: "read-through into a locked Dictionary",
                label: "store: first read of a key, instructions vs a read-through Dictionary"),
            .allocations(
                "Store.read, first read of a key", atMost: 6, label: "store: first read of a key, allocations"),
            .instructions(
                "Store.write, one observer, one memory level", atMost: 5_000,
                label: "store: one write, one observer, one memory level, instructions"),
            .instructions(
                "Store.read hit, 100 keys", atMost: 3, of: "locked Dictionary lookup",
                label: "store: keyed hit through Store.read, instructions vs a locked Dictionary"),
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } })
}

/// 18. `try await store.read(...)` answered by a value the store holds, against a plain async function reading a
/// locked `Dictionary`.
func storeAsyncHitScenario(reads: Int) -> Scenario {
    let store = Store(
        levels: [], fetch: LoaderFamily { (key: Int) in ImmediateLoader(result: .success(key)) }, keptValues: 100)
    for key in 0..<100 { store.write(key, for: key) }
    let table = AsyncTable()
    let plain = Variant(name: "async function, locked Dictionary") { count in
        blocking {
            var sum = 0
            for index in 0..<count { sum &+= await table.value(for: index % 100) }
            return sum
        }
    }
    let read = Variant(name: "try await Store.read hit") { count in
        blocking {
            var sum = 0
            for index in 0..<count { sum &+= (try? await store.read(index % 100).load())?.value ?? 0 }
            return sum
        }
    }
    return Scenario(
        title: "18. Store async hit: try await store.read, 100 keys",
        unit: "reads", operations: reads, reference: "async function, locked Dictionary",
        variants: [plain, read],
        targets: [
            .instructions(
                "try await Store.read hit", atMost: 5, of: "async function, locked Dictionary",
                label: "store: try await read hit, instructions vs a plain async function")
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        // The executor's own work now and then (a worker parked or woken) costs about 160,000 instructions once
        // per run: over 200 reads it moved the figure by 800 from run to run; over 5,000, by about 30.
        countedOperations: 5_000)
}

/// A locked dictionary behind an async function: what an app would otherwise write.
final class AsyncTable: Sendable {
    private let values = Locked(Dictionary(uniqueKeysWithValues: (0..<100).map { ($0, $0) }))

    func value(for key: Int) async -> Int {
        values.withLock { $0[key] ?? 0 }
    }
}

/// Heap bytes the store holds per key after `keys` distinct keys were read once and released, beside its memory
/// level's own (glibc's allocator statistics; not measured elsewhere). The same reads with every value kept
/// (`keptValues: .max`) show what holding a key costs, and that the measurement sees it.
func storeMemoryPerKeyLines(keys: Int) -> [String] {
    func measure(keptValues: Int?) -> (perKey: Double, held: Int)? {
        let store = Store(
            levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")],
            fetch: LoaderFamily { (key: Int) in ImmediateLoader(result: .success(key)) }, keptValues: keptValues)
        // Fill the level first, so that what grows afterwards is the store's (the level holds 1,000 at most).
        for key in 0..<2_000 { _ = store.read(-1 - key).load { _ in } }
        let before = heap_bytes_in_use()
        for key in 0..<keys { _ = store.read(key).load { _ in } }
        let after = heap_bytes_in_use()
        guard before > 0 else { return nil }
        return ((Double(after) - Double(before)) / Double(keys), withExtendedLifetime(store) { store.count })
    }
    guard let bounded = measure(keptValues: nil), let kept = measure(keptValues: .max) else {
        return ["Store memory per key: not measured (no allocator statistics on this platform)"]
    }
    return [
        String(
            format: "Store memory after %d distinct keys read once (memory level of 1,000): %+.1f bytes per key, "
                + "%d keys held", keys, bounded.perKey, bounded.held),
        String(
            format: "  the same reads keeping every value (keptValues: .max): %+.1f bytes per key, %d keys held",
            kept.perKey, kept.held),
    ]
}
