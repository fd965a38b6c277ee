import LoadingTestSupport
import XCTest

@testable import Loading

/// The slots a store gives its keys: one per key the machine holds, given back once it holds nothing of the key,
/// and reused, so that they stay bounded like the keys themselves.
final class StoreKeysTests: XCTestCase {
    func test_aSlotGivenBack_isGivenToTheNextKey_andTheFirstKeyGetsANewOne() {
        var keys = StoreKeys()
        let a = keys.takeSlot()
        keys.keep(StoreKey("a"), a, hash: "a".hashValue)
        XCTAssertEqual(slot(of: "a", in: keys), a)

        keys.release(a)
        XCTAssertNil(slot(of: "a", in: keys))
        let b = keys.takeSlot()
        XCTAssertEqual(b, a, "reused")
        keys.keep(StoreKey("b"), b, hash: "b".hashValue)
        XCTAssertEqual((keys.object(at: b) as? StoreKey<String>)?.key, "b")
        XCTAssertNotEqual(keys.takeSlot(), b)
    }

    func test_keysWithOneHashValue_areToldApart_andEachIsForgottenAlone() {
        var keys = StoreKeys()
        let slots = (0..<5).map { number in
            let slot = keys.takeSlot()
            keys.keep(StoreKey(number), slot, hash: 7)  // one hash value for all
            return slot
        }
        for number in 0..<5 { XCTAssertEqual(slot(of: number, in: keys, hash: 7), slots[number]) }

        keys.release(slots[2])  // in the middle of the chain
        keys.release(slots[4])  // its head
        XCTAssertEqual(keys.count, 3)
        for number in [0, 1, 3] { XCTAssertEqual(slot(of: number, in: keys, hash: 7), slots[number]) }
        for number in [2, 4] { XCTAssertNil(slot(of: number, in: keys, hash: 7)) }
        keys.release(slots[2])  // a slot given back already: nothing changes
        XCTAssertEqual(keys.count, 3)
    }

    func test_keysThatAllHashAlike_areToldApartByTheStore_throughWritesReadsAndRemovals() {
        let store = Store<Colliding, Int>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Int>() })
        let keys = (0..<20).map(Colliding.init)
        let screen = StreamRecorder(store.changes(for: keys[7]))
        for key in keys { store.write(key.id * 10, for: key) }
        store.remove(keys[3])

        for key in keys where key.id != 3 {
            let read = LoadRecorder<StoreResponse<Int>>()
            _ = store.read(key, policy: .cacheOnly).load(completion: read.record)
            XCTAssertEqual(read.values.map(\.value), [key.id * 10])
        }
        let removed = LoadRecorder<StoreResponse<Int>>()
        _ = store.read(keys[3], policy: .cacheOnly).load(completion: removed.record)
        XCTAssertNil(removed.values.first?.value ?? nil)
        XCTAssertEqual(screen.values.map(\.value), [70], "the observed key's own write, and no other")
        XCTAssertEqual(store.count, 19)
    }

    /// A key whose hash value is the same for every key.
    private struct Colliding: Hashable, Sendable {
        let id: Int

        func hash(into hasher: inout Hasher) {
            hasher.combine(0)
        }
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
        XCTAssertEqual(slotCounts(of: store).keys, 1 + 256, "the observed key and the last 256 values")

        // Once an invalidation is recorded, the keys fetched since are remembered as refreshed: at most 4,096.
        store.invalidate(-2)
        for key in 100_000..<200_000 { _ = store.read(key).load { _ in } }
        let (keys, slots) = slotCounts(of: store)
        XCTAssertLessThanOrEqual(keys, 1 + 256 + 4_096)
        XCTAssertLessThanOrEqual(slots, 1 + 256 + 4_096 + 1, "slots given back are reused, not added")
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

        XCTAssertEqual(store.engine.slotCounts.keys, 1, "the observed key's alone")
        XCTAssertEqual(store.count, 1)
        observed.cancel()
    }

    private func slotCounts<Key, Value>(of store: Store<Key, Value>) -> (keys: Int, slots: Int) {
        store.engine.slotCounts
    }

    private func slot<Key: Hashable & Sendable>(of key: Key, in keys: StoreKeys, hash: Int? = nil) -> Int? {
        keys.slot(hash: hash ?? key.hashValue, where: { ($0 as? StoreKey<Key>)?.key == key })
    }
}
