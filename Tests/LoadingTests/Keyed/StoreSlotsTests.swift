import LoadingTestSupport
import XCTest

@testable import Loading

/// The slots a store gives its keys: one per key the machine holds, given back once it holds nothing of the key,
/// and reused, so that they stay bounded like the keys themselves.
final class StoreSlotsTests: XCTestCase {
    func test_aSlotGivenBack_isGivenToTheNextKey_andTheFirstKeyGetsANewOne() {
        var slots = StoreSlots<String>()
        let a = slots.slot(for: "a")
        XCTAssertTrue(a.isNew)
        XCTAssertEqual(slots.slot(for: "a").slot, a.slot)
        XCTAssertFalse(slots.slot(for: "a").isNew)

        slots.release(a.slot)
        let b = slots.slot(for: "b")
        XCTAssertEqual(b.slot, a.slot, "reused")
        XCTAssertEqual(slots.key(of: b.slot), "b")
        XCTAssertNotEqual(slots.slot(for: "a").slot, b.slot)
    }

    func test_aHundredThousandKeysReadOnce_leaveOnlyTheSlotsOfTheKeysTheStoreHolds() {
        let store = Store(
            levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")],
            fetch: LoaderFamily { (key: Int) in
                AnyLoader<Int> { completion in
                    completion(.success(key))
                    return AnyCancellationToken()
                }
            })
        let observed = store.changes(for: -1).sink { _ in }
        for key in 0..<100_000 { _ = store.read(key).load { _ in } }
        XCTAssertEqual(store.count, 1 + 256)
        XCTAssertEqual(slotCounts(of: store).slots, 1 + 256, "the observed key and the last 256 values")

        // Once an invalidation is recorded, the keys fetched since are remembered as refreshed: at most 4,096.
        store.invalidate(-2)
        for key in 100_000..<200_000 { _ = store.read(key).load { _ in } }
        let (slots, keys) = slotCounts(of: store)
        XCTAssertLessThanOrEqual(slots, 1 + 256 + 4_096)
        XCTAssertLessThanOrEqual(keys, 1 + 256 + 4_096 + 1, "slots given back are reused, not added")
        observed.cancel()
    }

    func test_aClear_givesBackTheSlotsOfEveryKeyNoOneObserves() {
        let store = Store<String, Int>(
            levels: [.cache(MemoryCache<String, Int>(), name: "memory")], fetch: LoaderFamily { _ in LoaderSpy<Int>() })
        let observed = store.changes(for: "watched").sink { _ in }
        for key in ["a", "b", "c", "watched"] { store.write(1, for: key) }
        store.invalidate("a")
        store.write(2, for: "a")  // remembered as refreshed after the invalidation

        store.clear()

        XCTAssertEqual(store.state.withLock { Set($0.slots.slots.keys) }, ["watched"])
        observed.cancel()
    }

    private func slotCounts<Key, Value>(of store: Store<Key, Value>) -> (slots: Int, keys: Int) {
        store.state.withLock { ($0.slots.slots.count, $0.slots.keys.count) }
    }
}
