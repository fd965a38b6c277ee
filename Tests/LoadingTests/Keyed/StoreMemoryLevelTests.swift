import Foundation
import LoadingTestHelpers
import XCTest

@testable import Loading

/// A `MemoryCache` as a store's level and as a cache of its own at once: what the store saves there is what the
/// cache reads, what the cache holds is what the store reads, and the cache's limits hold for what the store saves.
final class StoreMemoryLevelTests: XCTestCase {
    private let fetches = Locked(0)

    private func makeStore(_ memory: MemoryCache<String, String>) -> Store<String, String> {
        let fetches = fetches
        return Store(
            levels: [.cache(memory, name: "memory")],
            fetch: LoaderFamily { (key: String) in
                AnyLoader { completion in
                    fetches.withLock { $0 += 1 }
                    completion(.success("fetched \(key)"))
                    return AnyCancellationToken {}
                }
            },
            keptValues: 0)
    }

    private func read(_ key: String, from store: Store<String, String>) -> StoreResponse<String>? {
        let answered = expectation(description: "read of \(key)")
        let response = Locked<StoreResponse<String>?>(nil)
        _ = store.read(key).load { result in
            response.withLock { $0 = try? result.get() }
            answered.fulfill()
        }
        wait(for: [answered], timeout: .watchdog)
        return response.withLock { $0 }
    }

    private func cached(_ key: String, in memory: MemoryCache<String, String>) -> String? {
        try? memory.cachedValue(for: key).get().value
    }

    func test_whatTheStoreSaves_isWhatTheCacheReads_andWhatTheCacheHolds_isWhatTheStoreReads() {
        let memory = MemoryCache<String, String>()
        let store = makeStore(memory)

        store.write("written", for: "a")
        XCTAssertEqual(cached("a", in: memory), "written")
        XCTAssertEqual(read("b", from: store)?.value, "fetched b")
        XCTAssertEqual(cached("b", in: memory), "fetched b", "a fetched value is saved to the level")

        memory.insert("put in the cache", for: "c")
        XCTAssertEqual(read("c", from: store)?.value, "put in the cache")
        XCTAssertEqual(read("c", from: store)?.origin, .cache("memory"))
        XCTAssertEqual(fetches.withLock { $0 }, 1, "only b was fetched")

        store.remove("a")
        XCTAssertNil(cached("a", in: memory), "a removal reaches the cache")
    }

    func test_theCachesCostLimit_holdsForWhatTheStoreSaves() {
        let memory = MemoryCache<String, String>(costLimit: 10, cost: { $0.count })
        let store = makeStore(memory)

        store.write("short", for: "fits")
        store.write("far longer than ten", for: "too costly")

        XCTAssertEqual(cached("fits", in: memory), "short")
        XCTAssertNil(cached("too costly", in: memory), "a value costing more than the limit is not kept")
        XCTAssertEqual(memory.totalCost, 5)
        XCTAssertEqual(read("too costly", from: store)?.value, "fetched too costly", "the level misses: fetched")
    }

    func test_aFullCache_evictsTheLeastRecentlyUsed_ofWhatTheStoreSaves() {
        let memory = MemoryCache<String, String>(countLimit: 2)
        let store = makeStore(memory)

        store.write("1", for: "first")
        store.write("2", for: "second")
        store.write("3", for: "third")

        XCTAssertNil(cached("first", in: memory))
        XCTAssertEqual(cached("second", in: memory), "2")
        XCTAssertEqual(cached("third", in: memory), "3")
        XCTAssertEqual(read("first", from: store)?.value, "fetched first", "evicted, and the store kept no value")
    }
}
