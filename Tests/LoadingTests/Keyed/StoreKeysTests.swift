import LoadingTestHelpers
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

        XCTAssertEqual((keys.release(a) as? StoreKey<String>)?.key, "a", "handed back, to be let go of unlocked")
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

        XCTAssertNotNil(keys.release(slots[2]))  // in the middle of the chain
        XCTAssertNotNil(keys.release(slots[4]))  // its head
        XCTAssertEqual(keys.count, 3)
        for number in [0, 1, 3] { XCTAssertEqual(slot(of: number, in: keys, hash: 7), slots[number]) }
        for number in [2, 4] { XCTAssertNil(slot(of: number, in: keys, hash: 7)) }
        XCTAssertNil(keys.release(slots[2]))  // a slot given back already: nothing changes
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

    func test_aKeyLetGoOf_isReleasedAfterTheStoreUnlocks() {
        let store = Store<Witnessed, Int>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Int>() })
        let answered = Answered()
        do {
            // The store keeps the only copy of this key's witness: its deinitializer (a user's code) runs when the
            // store lets go of the key, and calls the store from another thread.
            let witness = Witness {
                let done = DispatchSemaphore(value: 0)
                DispatchQueue.global().async {
                    _ = store.count
                    done.signal()
                }
                answered.set(done.wait(timeout: .now() + .watchdog) == .success)
            }
            store.write(1, for: Witnessed(id: 1, witness: witness))
        }
        XCTAssertNil(answered.value, "kept while the store holds the key")

        store.remove(Witnessed(id: 1, witness: Witness {}))

        XCTAssertEqual(answered.value, true, "the store was not locked while the key's deinitializer ran")
        XCTAssertEqual(store.count, 0)
    }

    /// Runs its closure when it goes away.
    private final class Witness: Sendable {
        let onDeinit: @Sendable () -> Void

        init(onDeinit: @escaping @Sendable () -> Void) {
            self.onDeinit = onDeinit
        }

        deinit { onDeinit() }
    }

    /// A key equal to another by its `id` alone, holding a witness of its lifetime.
    private struct Witnessed: Hashable, Sendable {
        let id: Int
        let witness: Witness

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }

        func hash(into hasher: inout Hasher) {
            hasher.combine(id)
        }
    }

    /// Whether the witness's call was answered.
    private final class Answered: Sendable {
        private let state = Locked<Bool?>(nil)

        var value: Bool? { state.withLock { $0 } }

        func set(_ value: Bool) {
            state.withLock { $0 = value }
        }
    }

    func test_manyKeysReadOnce_leaveOnlyTheSlotsOfTheKeysTheStoreHolds() {
        let count = scaled(20_000, floor: 10_000)  // far more than the store keeps
        let store = Store(
            levels: [.cache(MemoryCache<Int, Int>(countLimit: 1_000), name: "memory")],
            fetch: LoaderFamily { (key: Int) in
                AnyLoader<Int> { completion in
                    completion(.success(key))
                    return AnyCancellationToken {}
                }
            })
        let observed = store.changes(for: -1).sink { _ in }
        for key in 0..<count { _ = store.read(key).load { _ in } }
        XCTAssertEqual(store.count, 1 + 256)
        XCTAssertEqual(slotCounts(of: store).keys, 1 + 256, "the observed key and the last 256 values")

        // Once an invalidation is recorded, the keys fetched since are remembered as refreshed: at most 4,096.
        store.invalidate(-2)
        for key in count..<(2 * count) { _ = store.read(key).load { _ in } }
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
