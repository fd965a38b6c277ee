import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The durable offline mutation queue's contract: saved before shown, shown at once and after a restart, sent in
/// order one at a time when online, each settled alone, dropped by a logout.
final class MutationQueueTests: XCTestCase {
    func test_enqueue_savesBeforeReturning_showsAtOnce_andIsSettledWhenTheServerAccepts() throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server)
        let outcome = LoadRecorder<Void>()

        let id = try queue.enqueue("b") { outcome.record($0) }

        XCTAssertEqual(try storage.loadAll().map(\.id), [id], "on disk once enqueue returned")
        XCTAssertEqual(UUID(uuidString: id)?.uuidString, id, "a UUID's text, as Foundation writes it")
        XCTAssertEqual(shownList(store), ["a", "c"], "shown at once")
        XCTAssertEqual(server.sent, ["b"])
        XCTAssertEqual(server.keys, [id], "its id is its idempotency key")
        XCTAssertTrue(queue.isMutating)

        server.answer(0)

        XCTAssertEqual(outcome.count, 1)
        XCTAssertEqual(shownList(store), ["a", "c"])
        XCTAssertEqual(confirmedList(store), ["a", "c"], "joins the confirmed value")
        XCTAssertEqual(try storage.loadAll().count, 0, "and leaves the storage")
        XCTAssertFalse(queue.isMutating)
    }

    func test_offline_nothingIsSent_thenTheMutationsGoInOrder_oneAtATime() throws {
        let (store, storage, server) = makeEnvironment()
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try makeSUT(store, storage, server, connectivity: connectivity)

        try queue.enqueue("a")
        try queue.enqueue("b")
        XCTAssertEqual(shownList(store), ["c"])
        XCTAssertEqual(server.sent, [], "offline: nothing is sent")
        XCTAssertEqual(queue.pending.map(\.status), [.waiting, .waiting])

        connectivity.setOnline(true)
        XCTAssertEqual(server.sent, ["a"], "the oldest first, alone")
        XCTAssertEqual(queue.pending.map(\.status), [.sending, .waiting])
        server.answer(0)
        XCTAssertEqual(server.sent, ["a", "b"], "the next once the first is settled")
        server.answer(1)
        XCTAssertEqual(confirmedList(store), ["c"])
    }

    func test_aRefusedReplayedMutation_isUndoneAlone_andTheNextIsStillSent() throws {
        let directory = makeQueueDirectory("outbox")
        let offline = ManualConnectivity(isOnline: false)
        do {
            let (store, _, server) = makeEnvironment()
            let queue = try makeSUT(store, FileMutationStorage(directory: directory), server, connectivity: offline)
            try queue.enqueue("a")
            try queue.enqueue("b")
        }
        // A new launch: the kept mutations show again, then replay when online.
        let (store, storage, server) = makeEnvironment(directory: directory)
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try makeSUT(store, storage, server, connectivity: connectivity)
        XCTAssertEqual(shownList(store), ["c"], "both shown again before anything is sent")

        connectivity.setOnline(true)
        server.refuse(0)
        XCTAssertEqual(shownList(store), ["a", "c"], "the refused one is undone alone")
        server.answer(1)

        XCTAssertEqual(server.sent, ["a", "b"])
        XCTAssertEqual(confirmedList(store), ["a", "c"])
        XCTAssertEqual(try storage.loadAll().count, 0)
        XCTAssertFalse(queue.isMutating)
    }

    func test_aTransientFailure_keepsItFirst_recordsTheAttempt_andSendsItAgainAfterTheDelay() throws {
        let (store, storage, server) = makeEnvironment()
        let scheduler = TestScheduler()
        let queue = try makeSUT(store, storage, server, scheduler: scheduler)
        try queue.enqueue("a")
        try queue.enqueue("b")

        server.fail(0, with: URLError(.timedOut))

        XCTAssertEqual(shownList(store), ["c"], "still shown")
        XCTAssertEqual(queue.pending.map(\.attempts), [1, 0])
        XCTAssertNotNil(queue.pending.first?.lastError)
        XCTAssertEqual(try storage.loadAll().map(\.attempts), [1, 0], "the attempt is on disk")
        XCTAssertEqual(server.sent, ["a"], "the next waits: order is kept")
        scheduler.advance(by: .milliseconds(999))
        XCTAssertEqual(server.sent, ["a"])
        scheduler.advance(by: .milliseconds(1))
        XCTAssertEqual(server.sent, ["a", "a"])
        XCTAssertEqual(server.keys[0], server.keys[1], "the same idempotency key each time")
        server.answer(1)
        server.answer(2)
        XCTAssertEqual(confirmedList(store), ["c"])
    }

    func test_theNetworkComingBack_sendsAFailedMutationAgainAtOnce() throws {
        let (store, storage, server) = makeEnvironment()
        let connectivity = ManualConnectivity(isOnline: true)
        let scheduler = TestScheduler()
        let queue = try makeSUT(store, storage, server, connectivity: connectivity, scheduler: scheduler)
        try queue.enqueue("a")
        connectivity.setOnline(false)
        server.fail(0, with: URLError(.notConnectedToInternet))

        connectivity.setOnline(true)

        XCTAssertEqual(server.sent, ["a", "a"])
        XCTAssertEqual(scheduler.pendingCount, 0, "the retry's timer is cancelled")
    }

    func test_aLogout_dropsThePendingMutations_fromTheQueueAndTheStorage() throws {
        let (store, storage, server) = makeEnvironment()
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try makeSUT(store, storage, server, connectivity: connectivity)
        let outcome = LoadRecorder<Void>()
        try queue.enqueue("a") { outcome.record($0) }

        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
        connectivity.setOnline(true)

        XCTAssertEqual(server.sent, [], "never sent after the logout")
        XCTAssertEqual(outcome.errors.first as? StoreError, .cleared)
        XCTAssertEqual(try storage.loadAll().count, 0)
        XCTAssertFalse(queue.isMutating)
    }

    func test_aLogoutWhileAMutationIsSent_cancelsTheAttempt() throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server)
        try queue.enqueue("a")

        store.clear()

        XCTAssertEqual(server.cancelled, [0])
        XCTAssertFalse(queue.isMutating)
    }

    func test_discard_undoesTheMutation_forgetsIt_andSendsTheNext() throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server)
        let first = try queue.enqueue("a")
        try queue.enqueue("b")

        queue.discard(first)

        XCTAssertEqual(server.cancelled, [0])
        XCTAssertEqual(shownList(store), ["a", "c"])
        XCTAssertEqual(try storage.loadAll().map(\.input), ["b"])
        XCTAssertEqual(server.sent, ["a", "b"])
    }

    func test_aMutationThatCannotBeSaved_throws_andIsNeitherShownNorSent() throws {
        let (store, _, server) = makeEnvironment()
        let queue = try makeSUT(store, FailingStorage(), server)

        XCTAssertThrowsError(try queue.enqueue("a"))

        XCTAssertEqual(shownList(store), ["a", "b", "c"])
        XCTAssertEqual(server.sent, [])
        XCTAssertFalse(queue.isMutating)
    }

    func test_pendingMutations_listsEachMutationWithItsStatusAndAttempts() throws {
        let (store, storage, server) = makeEnvironment()
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try makeSUT(store, storage, server, connectivity: connectivity)
        let lists = StreamRecorder(queue.pendingMutations)

        try queue.enqueue("a")
        connectivity.setOnline(true)
        server.answer(0)

        XCTAssertEqual(
            lists.values.map { $0.map { "\($0.input) \($0.status) \($0.attempts)" } },
            [[], ["a waiting 0"], ["a sending 1"], []])
    }

    func test_aThousandMutationsAnsweredAtOnce_replayInOrder_inConstantStackDepth() throws {
        let directory = makeQueueDirectory("outbox")
        let storage = FileMutationStorage<String>(directory: directory)
        for index in 0..<1_000 {
            try storage.save(
                StoredMutation(id: "m\(index)", sequence: index, input: "x\(index)", createdAt: Date(), attempts: 0))
        }
        let (store, _, _) = makeEnvironment()
        let sent = Locked<[String]>([])
        let queue = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" }, change: { item, list in list.map { $0 + [item] } },
            send: { item, _ in
                AnyLoader<Void> { completion in
                    sent.withLock { $0.append(item) }
                    completion(.success(()))
                    return AnyCancellationToken {}
                }
            }, isRefused: { _ in false })

        XCTAssertEqual(sent.withLock { $0 }, (0..<1_000).map { "x\($0)" })
        XCTAssertEqual(confirmedList(store)?.count, 1_003)
        XCTAssertFalse(queue.isMutating)
        XCTAssertEqual(try storage.loadAll().count, 0)
    }

    func test_concurrentEnqueuesAndALogoutRace_eachMutationIsSentAtMostOnce_inTheOrderItWasNumbered() throws {
        let directory = makeQueueDirectory("outbox")
        let storage = FileMutationStorage<String>(directory: directory)
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write([], for: "list")
        let sent = Locked<[String]>([])
        let queue = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" }, change: { item, list in (list ?? []) + [item] },
            send: { item, _ in
                AnyLoader<Void> { completion in
                    sent.withLock { $0.append(item) }
                    DispatchQueue.global().async { completion(.success(())) }  // answers on another thread
                    return AnyCancellationToken {}
                }
            }, isRefused: { _ in false })

        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for index in 0..<25 {
                let item = "\(thread)-\(index)"
                _ = try? queue.enqueue(item)
                if thread == 0, index == 12 { store.clear() }
            }
        }
        XCTAssertTrue(eventually { !queue.isMutating }, "every mutation was settled")

        let sentItems = sent.withLock { $0 }
        XCTAssertEqual(Set(sentItems).count, sentItems.count, "none sent twice")
        for thread in 0..<8 {
            let indices = sentItems.filter { $0.hasPrefix("\(thread)-") }.compactMap {
                Int($0.split(separator: "-")[1])
            }
            XCTAssertEqual(indices, indices.sorted(), "a caller's mutations go in the order it made them")
        }
        XCTAssertEqual(try storage.loadAll().count, 0, "the storage forgot every settled or cleared mutation")
        let confirmed = LoadRecorder<StoreResponse<[String]>>()
        _ = confirmed.load(store.read("list", policy: .cacheOnly))
        let shown = confirmed.values.first?.value ?? []
        XCTAssertEqual(Set(shown).count, shown.count)
        XCTAssertTrue(Set(shown).isSubset(of: Set(sentItems)), "only what the server accepted is confirmed")
    }

    // MARK: Helpers

    private func makeEnvironment(
        directory: URL? = nil
    ) -> (Store<String, [String]>, FileMutationStorage<String>, ServerSpy) {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        return (store, FileMutationStorage(directory: directory ?? makeQueueDirectory("outbox")), ServerSpy())
    }

    private func makeSUT(
        _ store: Store<String, [String]>, _ storage: some MutationStorage<String>, _ server: ServerSpy,
        connectivity: ManualConnectivity? = nil, scheduler: TestScheduler = TestScheduler()
    ) throws -> MutationQueue<String, [String], String> {
        try MutationQueue(
            store: store, storage: storage, connectivity: connectivity, retryDelays: .constant(.seconds(1)),
            scheduler: scheduler, key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, idempotencyKey in server.send(item, idempotencyKey) },
            isRefused: { $0 is Refused })
    }

}

extension XCTestCase {
    /// A folder for a queue's storage, named with `prefix`, removed when the test ends.
    func makeQueueDirectory(_ prefix: String) -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }

    /// What the queue tests' key `"list"` shows: a cache-only read's value.
    func shownList(_ store: Store<String, [String]>) -> [String]? {
        let recorder = LoadRecorder<StoreResponse<[String]>>()
        _ = recorder.load(store.read("list", policy: .cacheOnly))
        return recorder.values.first?.value
    }

    /// The confirmed value of the queue tests' key `"list"`: `nil` while it shows pending changes.
    func confirmedList(_ store: Store<String, [String]>) -> [String]? {
        let recorder = LoadRecorder<StoreResponse<[String]>>()
        let subscription = store.changes(for: "list").sink { _ in }
        _ = recorder.load(store.read("list", policy: .cacheOnly))
        withExtendedLifetime(subscription) {}
        return recorder.values.first.flatMap { $0.hasPendingChanges ? nil : $0.value }
    }
}

/// The server's refusal of a mutation.
struct Refused: Error {}

/// A server whose answers the test gives one by one: each attempt is recorded with its idempotency key.
final class ServerSpy: Sendable {
    private let spy = LoaderSpy<Void>()
    private let log = Locked<[(item: String, key: String)]>([])

    var sent: [String] { log.withLock { $0.map(\.item) } }
    var keys: [String] { log.withLock { $0.map(\.key) } }
    var cancelled: [Int] { spy.cancelledRequests }

    func send(_ item: String, _ key: String) -> AnyLoader<Void> {
        AnyLoader { [spy, log] completion in
            log.withLock { $0.append((item, key)) }
            return spy.load(completion: completion)
        }
    }

    func answer(_ index: Int) { spy.complete(with: (), at: index) }
    func refuse(_ index: Int) { spy.fail(with: Refused(), at: index) }
    func fail(_ index: Int, with error: any Error) { spy.fail(with: error, at: index) }
}

/// Storage whose saves fail.
struct FailingStorage: MutationStorage {
    func loadAll() throws -> [StoredMutation<String>] { [] }
    func save(_ mutation: StoredMutation<String>) throws { throw URLError(.cannotWriteToFile) }
    func remove(_ mutation: StoredMutation<String>) throws {}
}
