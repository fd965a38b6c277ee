import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The `await` forms of the store's operations that end later: each returns what its callback form's completion
/// receives, when it would have run; cancelling the waiting task ends the wait, and the operation goes on.
final class StoreAwaitTests: XCTestCase {
    func test_awaitFlush_returnsOnceTheBurstIsSaved() async {
        let sut = makeSUT()
        let store = sut.store
        store.write("1", for: "a")
        sut.disk.holdSaves = true
        let finished = Locked(false)

        let flushing = Task {
            // Sample: begin
            // Before the app is suspended:
            await store.flush()
            // Sample: end
            finished.withLock { $0 = true }
        }
        await waitUntil { sut.disk.heldSaveCount == 1 }
        XCTAssertFalse(finished.withLock { $0 }, "not returned while the save is on its way")
        sut.disk.releaseSaves()
        await flushing.value

        XCTAssertEqual(sut.disk.values["a"], "1")
    }

    func test_awaitFlush_cancelled_endsTheWait_andTheWritesGoOn() async {
        let sut = makeSUT()
        sut.store.write("1", for: "a")
        sut.disk.holdSaves = true

        let flushing = Task { [store = sut.store] in await store.flush() }
        await waitUntil { sut.disk.heldSaveCount == 1 }
        flushing.cancel()
        await ended(flushing)

        XCTAssertNil(sut.disk.values["a"], "still on its way")
        sut.disk.releaseSaves()
        XCTAssertEqual(sut.disk.values["a"], "1", "and saved")
    }

    func test_awaitClear_returnsOnceEveryLevelIsEmpty() async {
        let sut = makeSUT()
        let store = sut.store
        store.write("1", for: "a")
        await store.flush()
        sut.disk.holdEmptying = true
        let finished = Locked(false)

        let clearing = Task {
            // Sample: begin
            await store.clear()
            // Sample: end
            finished.withLock { $0 = true }
        }
        await waitUntil { sut.disk.isEmptyingHeld }
        XCTAssertFalse(finished.withLock { $0 }, "not returned while a level is being emptied")
        sut.disk.releaseEmptying()
        await clearing.value

        XCTAssertEqual(sut.disk.values, [:])
        let inMemory = Locked<String?>(nil)
        sut.memory.value(for: "a") { result in inMemory.withLock { $0 = try? result.get().value } }
        XCTAssertNil(inMemory.withLock { $0 })
    }

    func test_awaitClear_cancelled_endsTheWait_andTheClearGoesOn() async {
        let sut = makeSUT()
        sut.store.write("1", for: "a")
        await sut.store.flush()
        sut.disk.holdEmptying = true

        let clearing = Task { [store = sut.store] in await store.clear() }
        await waitUntil { sut.disk.isEmptyingHeld }
        clearing.cancel()
        await ended(clearing)

        XCTAssertEqual(sut.disk.values["a"], "1", "still being emptied")
        sut.disk.releaseEmptying()
        XCTAssertEqual(sut.disk.values, [:], "and emptied: a logout is never undone")
    }

    // MARK: Helpers

    private struct SUT {
        let store: Store<String, String>
        let memory: MemoryCache<String, String>
        let disk: HeldCache
    }

    private func makeSUT() -> SUT {
        let memory = MemoryCache<String, String>()
        let disk = HeldCache()
        let store = Store(
            levels: [
                .cache(memory, name: "memory"),
                .cache(disk, name: "disk", debouncingWritesFor: .seconds(60), scheduler: TestScheduler()),
            ],
            fetch: LoaderFamily { (_: String) in
                AnyLoader<String> { completion in
                    completion(.failure(URLError(.notConnectedToInternet)))
                    return AnyCancellationToken {}
                }
            })
        return SUT(store: store, memory: memory, disk: disk)
    }

    /// Waits (a watchdog, not a pace) until `condition` holds.
    private func waitUntil(_ condition: @escaping @Sendable () -> Bool) async {
        let held = await eventuallyAsync { condition() }
        XCTAssertTrue(held, "the watchdog ran out")
    }

    /// Waits for `task` to end, failing when the watchdog runs out first.
    private func ended(_ task: Task<Void, Never>) async {
        let done = expectation(description: "the wait ended")
        Task {
            await task.value
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: .watchdog)
    }
}

/// A memory level whose saves and emptying can be held until released.
private final class HeldCache: KeyedCache {
    private let base = MemoryCache<String, String>()
    private let held = Locked<(saves: Bool, emptying: Bool, waiting: [@Sendable () -> Void], emptyings: Int)>(
        (false, false, [], 0))

    /// What it holds of the keys the tests write (a memory cache answers at once).
    var values: [String: String] {
        let values = Locked<[String: String]>([:])
        for key in ["a", "b"] {
            base.value(for: key) { result in
                if let value = try? result.get().value { values.withLock { $0[key] = value } }
            }
        }
        return values.withLock { $0 }
    }

    var holdSaves: Bool {
        get { held.withLock { $0.saves } }
        set { held.withLock { $0.saves = newValue } }
    }

    var holdEmptying: Bool {
        get { held.withLock { $0.emptying } }
        set { held.withLock { $0.emptying = newValue } }
    }

    var heldSaveCount: Int { held.withLock { $0.waiting.count - $0.emptyings } }
    var isEmptyingHeld: Bool { held.withLock { $0.emptyings > 0 } }

    func releaseSaves() { release() }
    func releaseEmptying() { release() }

    private func release() {
        let waiting = held.withLock { held in
            (held.saves, held.emptying, held.emptyings) = (false, false, 0)
            defer { held.waiting = [] }
            return held.waiting
        }
        for operation in waiting { operation() }
    }

    private func run(emptying: Bool, _ operation: @escaping @Sendable () -> Void) {
        let waits = held.withLock { held -> Bool in
            guard emptying ? held.emptying : held.saves else { return false }
            held.waiting.append(operation)
            if emptying { held.emptyings += 1 }
            return true
        }
        if !waits { operation() }
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        base.value(for: key, completion: completion)
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        run(emptying: false) { [base] in base.save(value, for: key, completion: completion) }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeValue(for: key, completion: completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        run(emptying: true) { [base] in base.removeAll(completion: completion) }
    }
}
