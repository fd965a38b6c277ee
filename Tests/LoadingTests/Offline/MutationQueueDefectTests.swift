import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// What a logout, a crash, a copied file and concurrent callers must not break in a mutation queue: nothing of the
/// old user is shown or sent after a logout, every mutation is shown in the order it is sent, each attempt is counted
/// before it goes out, and every mutation's end is told, restored ones included.
final class MutationQueueDefectTests: XCTestCase {
    // MARK: Accepted

    func test_anAcceptedMutation_leavesItsStorageOnlyOnceEveryLevelSavedTheConfirmedValue() throws {
        let disk = HeldSavesCache()
        let store = Store<String, [String]>(
            levels: [.cache(disk, name: "disk")], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        disk.releaseSaves()
        let storage = GatedStorage()
        let server = ServerSpy()
        let queue = try makeQueue(store, storage, server, connectivity: ManualConnectivity(isOnline: true))
        let outcome = LoadRecorder<Void>()
        try queue.enqueue("a") { outcome.record($0) }
        XCTAssertTrue(eventually { server.sent == ["a"] })

        disk.holdSaves()
        server.answer(0)  // accepted: the confirmed value goes to the slow disk

        XCTAssertTrue(eventually { disk.savesHeld == 1 }, "the disk is saving the confirmed value")
        XCTAssertEqual(storage.kept.count, 1, "the mutation stays kept while the disk saves: a kill now loses nothing")
        XCTAssertEqual(outcome.count, 0, "nor has it ended")

        disk.releaseSaves()
        XCTAssertTrue(eventually { outcome.count == 1 }, "it ends once the disk holds the value")
        XCTAssertEqual(storage.kept.count, 0, "and only then leaves the storage")
        XCTAssertEqual(disk.saved["list"], ["b", "c"])
    }

    // MARK: Logout

    func test_anEnqueueWhoseSaveIsUnderWayWhenTheStoreIsCleared_isNeitherShownNorSentNorKept() throws {
        let store = makeStore()
        let storage = GatedStorage()
        let server = ServerSpy()
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try makeQueue(store, storage, server, connectivity: connectivity)
        let shown = StreamRecorder(store.changes(for: "list"))
        storage.holdSaves()

        let enqueued = Locked<Result<String, any Error>?>(nil)
        let outcome = LoadRecorder<Void>()
        DispatchQueue.global().async {
            let result = Result { try queue.enqueue("a") { outcome.record($0) } }
            enqueued.withLock { $0 = result }
        }
        XCTAssertTrue(eventually { storage.savesStarted == 1 }, "the enqueue is writing its file")
        let cleared = clearReturningAtOnce(store)  // a logout never waits for the storage
        XCTAssertEqual(shown.values.map(\.value), [["a", "b", "c"], nil], "the old user's list is gone at once")
        XCTAssertFalse(cleared.withLock { $0 }, "the clear ends once the save under way landed and was removed")
        storage.releaseSaves()

        XCTAssertTrue(eventually { enqueued.withLock { $0 } != nil && cleared.withLock { $0 } })
        let result = try XCTUnwrap(enqueued.withLock { $0 })
        XCTAssertThrowsError(try result.get(), "an enqueue the clear overtook throws") { error in
            XCTAssertEqual(error as? StoreError, .cleared)
        }
        XCTAssertEqual(outcome.count, 0, "a throwing enqueue calls no completion")
        XCTAssertEqual(
            shown.values.map(\.value), [["a", "b", "c"], nil], "the clear shows nothing, and nothing reappears")
        XCTAssertEqual(try storage.loadAll().count, 0, "nothing stays kept")
        XCTAssertFalse(queue.isMutating)

        connectivity.setOnline(true)
        XCTAssertEqual(server.sent, [], "nothing is sent")
        let relaunched = try makeQueue(makeStore(), storage, server)
        XCTAssertFalse(relaunched.isMutating, "nor at the next launch")
        XCTAssertEqual(server.sent, [])
    }

    func test_aSaveThatDoesNotEnd_neverBlocksALogoutsCaller_andTheNextUsersChangesWaitForIt() throws {
        let store = makeStore()
        let storage = GatedStorage()
        let server = ServerSpy()
        let queue = try makeQueue(store, storage, server, connectivity: ManualConnectivity(isOnline: true))
        let shown = StreamRecorder(store.changes(for: "list"))
        storage.holdSaves()
        DispatchQueue.global().async { _ = try? queue.enqueue("a") }
        XCTAssertTrue(eventually { storage.savesStarted == 1 }, "the old user's change is writing its file")

        let cleared = clearReturningAtOnce(store)  // the save hangs: the caller goes on all the same
        store.write(["x"], for: "list")  // the next user
        XCTAssertEqual(shown.values.last?.value, ["x"])
        XCTAssertFalse(cleared.withLock { $0 })
        XCTAssertEqual(server.sent, [], "nothing sent while the logout has not ended")

        storage.releaseSaves()
        XCTAssertTrue(eventually { cleared.withLock { $0 } }, "the logout ends once the save landed")
        XCTAssertEqual(try storage.loadAll().count, 0, "and the old user's file is gone")
        XCTAssertEqual(server.sent, [], "the old user's change is never sent")
    }

    func test_anEnqueueRacingALogout_endsBeforeIt_throws_orComesWhollyAfterIt() throws {
        for _ in 0..<200 {
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
            let storage = GatedStorage()
            let queue = try MutationQueue(
                store: store, storage: storage, connectivity: ManualConnectivity(isOnline: false),
                key: { _ in "list" }, change: { item, list in (list ?? []) + [item] },
                send: { _, _ in AnyLoader<Void> { _ in AnyCancellationToken {} } }, isRefused: { _ in false })
            let start = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let threw = Locked(false)
            DispatchQueue.global().async {
                start.wait()
                do { try queue.enqueue("a") } catch { threw.withLock { $0 = true } }
                done.signal()
            }
            start.signal()
            store.clear()
            done.wait()
            let shown = StreamRecorder(store.changes(for: "list")).values.last?.value
            if threw.withLock({ $0 }) || storage.kept.isEmpty {
                XCTAssertNil(shown, "an enqueue that threw or was dropped by the logout shows nothing after it")
                XCTAssertTrue(storage.kept.isEmpty)
                XCTAssertFalse(queue.isMutating)
            } else {
                XCTAssertEqual(shown, ["a"], "an enqueue after the logout is shown, kept and pending")
                XCTAssertTrue(queue.isMutating)
            }
        }
    }

    func test_aLogout_startsNoOtherMutation_andALateAnswerOfTheCancelledOneChangesNothing() throws {
        let store = makeStore()
        let server = ServerSpy()
        let queue = try makeQueue(store, GatedStorage(), server)
        try queue.enqueue("a")
        try queue.enqueue("b")
        XCTAssertEqual(server.sent, ["a"], "a is in flight, b waits")

        store.clear()

        XCTAssertEqual(server.sent, ["a"], "b is never started")
        XCTAssertEqual(server.cancelled, [0], "a's attempt is cancelled")
        server.answer(0)
        XCTAssertEqual(server.sent, ["a"])
        XCTAssertFalse(queue.isMutating)
        XCTAssertNil(store.read("list", policy: .cacheOnly).loadResult().flatMap { try? $0.get().value })
    }

    // MARK: Order and attempts

    func test_enqueuesFromEightThreads_areShownInTheOrderTheyAreSent() throws {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write([], for: "list")
        let observed = StreamRecorder(store.changes(for: "list"))
        let storage = GatedStorage(jitter: true)
        let server = ServerSpy()
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try MutationQueue(
            store: store, storage: storage, connectivity: connectivity, key: { _ in "list" },
            change: { item, list in (list ?? []) + [item] },
            send: { item, key in server.send(item, key) }, isRefused: { _ in false })

        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<25 { _ = try? queue.enqueue("\(thread)-\(index)") }
        }
        let shownOrder = observed.values.last?.value ?? []
        XCTAssertEqual(shownOrder.count, 200)
        XCTAssertEqual(shownOrder, queue.pending.map(\.input), "shown in the queue's order")

        connectivity.setOnline(true)
        for index in 0..<200 { server.answer(index) }
        XCTAssertEqual(server.sent, shownOrder, "sent in the order shown")
        XCTAssertEqual(observed.values.last?.value, shownOrder, "confirmations never reorder the list")
        XCTAssertEqual(observed.values.last?.hasPendingChanges, false)
    }

    func test_anAttemptIsRecordedBeforeItIsSent() throws {
        let store = makeStore()
        let storage = GatedStorage()
        let attemptsWhenSent = Locked<[Int]>([])
        let queue = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { _, id in
                attemptsWhenSent.withLock { $0.append(storage.kept[id]?.attempts ?? -1) }
                return AnyLoader<Void> { _ in AnyCancellationToken {} }
            }, isRefused: { _ in false })

        try queue.enqueue("a")

        XCTAssertEqual(attemptsWhenSent.withLock { $0 }, [1], "a crash during the attempt still counts it")
        XCTAssertEqual(queue.pending.map(\.attempts), [1])
    }

    // MARK: Copies and outcomes

    func test_aCopiedMutationFile_isLoadedOnce_andNoFileIsLeftOnceItIsSettled() throws {
        let directory = makeDirectory()
        let storage = FileMutationStorage<String>(directory: directory)
        try storage.save(StoredMutation(id: "m1", sequence: 0, input: "a", createdAt: Date(), attempts: 0))
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        let original = directory.appendingPathComponent(try XCTUnwrap(files.first))
        try FileManager.default.copyItem(
            at: original, to: directory.appendingPathComponent("00000000000000000007-m1.mutation"))

        XCTAssertEqual(try storage.loadAll().map(\.id), ["m1"], "one mutation per id")

        let store = makeStore()
        let server = ServerSpy()
        let queue = try makeQueue(store, storage, server)
        XCTAssertEqual(queue.pending.count, 1)
        server.answer(0)
        XCTAssertFalse(queue.isMutating)
        XCTAssertEqual(try storage.loadAll().count, 0, "the copy does not come back at the next launch")
        let response = try store.read("list", policy: .cacheOnly).loadResult()?.get()
        XCTAssertEqual(response?.value, ["b", "c"])
        XCTAssertEqual(response?.hasPendingChanges, false, "no orphaned pending change")
    }

    func test_restoredMutations_tellHowTheyEnded_andAnUnreadableFileIsReported() throws {
        let directory = makeDirectory()
        let storage = FileMutationStorage<String>(directory: directory)
        for (index, item) in ["a", "b", "c"].enumerated() {
            try storage.save(
                StoredMutation(id: "m\(index)", sequence: index, input: item, createdAt: Date(), attempts: 0))
        }
        try Data("not json".utf8).write(to: directory.appendingPathComponent("00000000000000000009-broken.mutation"))

        let settled = Locked<[String]>([])
        let failures = Locked<[MutationStorageError]>([])
        let server = ServerSpy()
        let store = makeStore()
        let queue = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, key in server.send(item, key) }, isRefused: { $0 is Refused },
            onStorageFailure: { error in failures.withLock { $0.append(error as! MutationStorageError) } },
            onSettled: { mutation in settled.withLock { $0.append("\(mutation.input) \(mutation.outcome)") } })

        XCTAssertEqual(failures.withLock { $0.map(\.operation) }, [.load], "the unreadable file is reported")
        XCTAssertEqual(failures.withLock { $0.first?.file.lastPathComponent }, "00000000000000000009-broken.mutation")
        server.answer(0)
        server.refuse(1)
        queue.discard("m2")

        XCTAssertEqual(settled.withLock { $0 }, ["a accepted", "b refused(Refused())", "c discarded"])
    }

    // MARK: Helpers

    private func makeStore() -> Store<String, [String]> {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        return store
    }

    private func makeQueue(
        _ store: Store<String, [String]>, _ storage: some MutationStorage<String>, _ server: ServerSpy,
        connectivity: ManualConnectivity? = nil
    ) throws -> MutationQueue<String, [String], String> {
        try MutationQueue(
            store: store, storage: storage, connectivity: connectivity, retryDelays: .constant(.seconds(1)),
            scheduler: TestScheduler(), key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, key in server.send(item, key) }, isRefused: { $0 is Refused })
    }

    /// Clears `store` from another thread, and fails the test when the clear does not return (within the watchdog);
    /// returns whether its completion came.
    private func clearReturningAtOnce(
        _ store: Store<String, [String]>, file: StaticString = #filePath, line: UInt = #line
    ) -> Locked<Bool> {
        let (cleared, returned) = (Locked(false), DispatchSemaphore(value: 0))
        DispatchQueue.global().async {
            store.clear { cleared.withLock { $0 = true } }
            returned.signal()
        }
        XCTAssertEqual(
            returned.wait(timeout: .now() + .watchdog), .success, "the clear returned to its caller", file: file,
            line: line)
        return cleared
    }

    private func makeDirectory() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }
}

/// Mutations kept in memory, whose saves the test can hold (a slow disk) or jitter (threads finishing out of order).
final class GatedStorage: MutationStorage {
    private struct State: Sendable {
        var kept: [String: StoredMutation<String>] = [:]
        var isHolding = false
        var savesStarted = 0
    }

    private let state = Locked(State())
    private let gate = DispatchSemaphore(value: 0)
    private let jitter: Bool

    init(jitter: Bool = false) {
        self.jitter = jitter
    }

    var kept: [String: StoredMutation<String>] { state.withLock { $0.kept } }
    var savesStarted: Int { state.withLock { $0.savesStarted } }

    func holdSaves() { state.withLock { $0.isHolding = true } }

    func releaseSaves() {
        state.withLock { $0.isHolding = false }
        gate.signal()
    }

    func loadAll() throws -> [StoredMutation<String>] {
        state.withLock { $0.kept.values.sorted { $0.sequence < $1.sequence } }
    }

    func save(_ mutation: StoredMutation<String>) throws {
        let holds = state.withLock { state -> Bool in
            state.savesStarted += 1
            return state.isHolding
        }
        if holds { gate.wait() }
        if jitter { LoadingTestHelpers.jitter(upTo: 1_000_000) }
        state.withLock { $0.kept[mutation.id] = mutation }
    }

    func remove(_ mutation: StoredMutation<String>) throws {
        state.withLock { _ = $0.kept.removeValue(forKey: mutation.id) }
    }
}

/// A disk level whose saves the test can hold: a held save's completion waits (the save is under way) until released.
private final class HeldSavesCache: KeyedCache {
    private struct State {
        var saved: [String: [String]] = [:]
        var isHolding = false
        var held: [@Sendable () -> Void] = []
    }

    private let state = Locked(State())

    var saved: [String: [String]] { state.withLock { $0.saved } }
    var savesHeld: Int { state.withLock { $0.held.count } }

    func holdSaves() { state.withLock { $0.isHolding = true } }

    func releaseSaves() {
        let held = state.withLock { state in
            state.isHolding = false
            defer { state.held = [] }
            return state.held
        }
        for save in held { save() }
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<[String]>, any Error>) -> Void) {
        let value = state.withLock { $0.saved[key] }
        completion(value.map { .success(CachedValue($0, savedAt: Date())) } ?? .failure(CacheMiss.absent))
    }

    func save(_ value: [String], for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let land: @Sendable () -> Void = { [state] in
            state.withLock { $0.saved[key] = value }
            completion(.success(()))
        }
        let now = state.withLock { state -> Bool in
            if state.isHolding { state.held.append(land) }
            return !state.isHolding
        }
        if now { land() }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        state.withLock { _ = $0.saved.removeValue(forKey: key) }
        completion(.success(()))
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        state.withLock { $0.saved = [:] }
        completion(.success(()))
    }
}

extension AnyLoader {
    /// The result of a load that answers at once (a read of what the store holds); `nil` when it does not.
    func loadResult() -> Result<Output, any Error>? {
        let result = Locked<Result<Output, any Error>?>(nil)
        _ = load { answer in result.withLock { $0 = answer } }
        return result.withLock { $0 }
    }
}
