import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// The `await` form of each operation that ends later: it returns what its callback form's completion receives (or
/// throws its error), and cancelling the waiting task cancels what can be cancelled (an optimistic change is undone,
/// a page request is let go of) and throws `CancellationError` at once.
final class AwaitFormsTests: XCTestCase {
    private struct Person: Identifiable, Equatable, Sendable {
        let id: String
        var name: String

        func renamed(_ name: String) -> Person { Person(id: id, name: name) }
    }

    private struct Refused: Error, Equatable {}

    // MARK: Store.mutate

    func test_storeMutate_returnsOnceTheConfirmedValueIsSaved() async throws {
        let (store, level) = makeStore()
        store.write(["u1", "u3"], for: "all")
        let api = FriendsAPI()
        let friends = store

        let mutating = Task {
            // Sample: begin
            try await friends.mutate("all", { ids in ids?.filter { $0 != "u3" } }, commit: api.deleteFriend("u3"))
            // Sample: end
        }
        await waitUntil { api.commits.loadCount == 1 }
        XCTAssertEqual(shown("all", in: store), ["u1"], "shown at once")
        api.commits.complete(with: ())
        try await ended(mutating)

        XCTAssertEqual(try level.cachedValue(for: "all").get().value, ["u1"], "saved once confirmed")
    }

    func test_storeMutate_refused_throwsTheCommitsError_onceTheChangeIsUndone() async {
        let (store, _) = makeStore()
        store.write(["u1", "u3"], for: "all")
        let commit = LoaderSpy<Void>()

        let mutating = Task { try await store.mutate("all", { $0?.filter { $0 != "u3" } }, commit: commit) }
        await waitUntil { commit.loadCount == 1 }
        commit.fail(with: Refused())

        await assertThrows(try await ended(mutating)) { XCTAssertEqual($0 as? Refused, Refused()) }
        XCTAssertEqual(shown("all", in: store), ["u1", "u3"], "undone")
    }

    func test_storeMutate_cancelled_cancelsTheCommit_andUndoesTheChange() async {
        let (store, _) = makeStore()
        store.write(["u1", "u3"], for: "all")
        let commit = LoaderSpy<Void>()

        let mutating = Task { try await store.mutate("all", { $0?.filter { $0 != "u3" } }, commit: commit) }
        await waitUntil { commit.loadCount == 1 }
        mutating.cancel()

        await assertThrows(try await ended(mutating)) { XCTAssertTrue($0 is CancellationError) }
        XCTAssertEqual(commit.cancelledRequests, [0], "the commit is cancelled")
        XCTAssertEqual(shown("all", in: store), ["u1", "u3"], "and the change undone")
    }

    // MARK: Store.refresh

    func test_storeRefresh_returnsTheFreshValueOnceSaved_throwsTheFetchsError_andCancelledLetsItGo() async throws {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("cached", for: "u1")

        let refreshing = Task {
            // Sample: begin
            let fresh = try await store.refresh("u1")  // pull to refresh: observers see the fresh value too
            // Sample: end
            return fresh
        }
        await waitUntil { network.loadCount(for: "u1") == 1 }
        network.complete("u1", with: "fresh")
        let fresh = try await ended(refreshing)
        XCTAssertEqual(fresh.value, "fresh")
        XCTAssertEqual(shown("u1", in: store), "fresh")

        let failing = Task { try await store.refresh("u1") }
        await waitUntil { network.loadCount(for: "u1") == 2 }
        network.fail("u1", with: Refused(), at: 1)
        await assertThrows(try await ended(failing)) { XCTAssertEqual($0 as? Refused, Refused()) }

        let cancelled = Task { try await store.refresh("u1") }
        await waitUntil { network.loadCount(for: "u1") == 3 }
        cancelled.cancel()
        await assertThrows(try await ended(cancelled)) { XCTAssertTrue($0 is CancellationError) }
        XCTAssertEqual(network.cancelledCount(for: "u1"), 1, "no one else waited: the fetch is cancelled")
    }

    // MARK: SharedEntities.mutate

    func test_entitiesMutate_returnsOnceEveryKeyConfirmedTheChange() async throws {
        let (entities, lists, details) = makeEntities()
        let api = PeopleAPI()

        let mutating = Task {
            // Sample: begin
            try await entities.mutate("u1", { $0.renamed("Ada L.") }, commit: api.rename("u1", to: "Ada L."))
            // Sample: end
        }
        // Shown in every key before the task waits (the commit starts with the first key's change).
        await waitUntil {
            valueShown(1, in: lists)?.map(\.name) == ["Ada L.", "Grace"]
                && valueShown("u1", in: details)?.name == "Ada L."
        }
        XCTAssertEqual(api.commits.loadCount, 1, "one commit")
        api.commits.complete(with: ())
        try await ended(mutating)

        XCTAssertEqual(shown("u1", in: details)?.name, "Ada L.")
    }

    func test_entitiesMutate_refused_throwsTheCommitsError_onceUndoneEverywhere() async {
        let (entities, lists, details) = makeEntities()
        let commit = LoaderSpy<Void>()

        let mutating = Task { try await entities.mutate("u1", { $0.renamed("Ada L.") }, commit: commit) }
        await waitUntil { commit.loadCount == 1 }
        commit.fail(with: Refused())

        await assertThrows(try await ended(mutating)) { XCTAssertEqual($0 as? Refused, Refused()) }
        XCTAssertEqual(shown(1, in: lists)?.map(\.name), ["Ada", "Grace"])
        XCTAssertEqual(shown("u1", in: details)?.name, "Ada")
    }

    func test_entitiesMutate_cancelled_cancelsTheCommit_andUndoesTheChangeEverywhere() async {
        let (entities, lists, details) = makeEntities()
        let commit = LoaderSpy<Void>()

        let mutating = Task { try await entities.mutate("u1", { $0.renamed("Ada L.") }, commit: commit) }
        await waitUntil { commit.loadCount == 1 }
        mutating.cancel()

        await assertThrows(try await ended(mutating)) { XCTAssertTrue($0 is CancellationError) }
        XCTAssertEqual(commit.cancelledRequests, [0])
        XCTAssertEqual(shown(1, in: lists)?.map(\.name), ["Ada", "Grace"])
        XCTAssertEqual(shown("u1", in: details)?.name, "Ada")
    }

    // MARK: PagedStore

    func test_loadNextPage_returnsTheListOnceThePageIsSaved_andLoadPreviousPage_thePageBefore() async throws {
        let (feeds, pages) = makePagedStore()
        let loading = Task {
            // Sample: begin
            let list = try await feeds.loadNextPage(of: "home").value
            // Sample: end
            return list
        }
        await waitUntil { pages.loadCount == 1 }
        pages.complete(with: Page(items: [10], nextCursor: 11, previousCursor: 9), at: 0)
        let first = try await ended(loading)
        XCTAssertEqual(first?.items, [10])

        let chat = feeds
        let older = Task {
            // Sample: begin
            let messages = try await chat.loadPreviousPage(of: "room-7").value
            // Sample: end
            _ = messages
            return try await chat.loadPreviousPage(of: "home").value
        }
        await waitUntil { pages.loadCount == 2 }
        pages.complete(with: Page(items: [0], nextCursor: 1, previousCursor: nil), at: 1)  // room-7's first page
        await waitUntil { pages.loadCount == 3 }
        pages.complete(with: Page(items: [9], nextCursor: 10, previousCursor: nil), at: 2)
        let prepended = try await ended(older)
        XCTAssertEqual(prepended?.items, [9, 10])
    }

    func test_loadNextPage_failed_throwsTheError_andCancelled_throwsCancellationError() async {
        await assertFailsAndCancels { feeds in try await feeds.loadNextPage(of: "home") }
    }

    func test_loadPreviousPage_failed_throwsTheError_andCancelled_throwsCancellationError() async {
        await assertFailsAndCancels { feeds in try await feeds.loadPreviousPage(of: "home") }
    }

    /// A page load whose request fails throws the error; one cancelled while its request runs throws
    /// `CancellationError`, and its request (this caller's alone) is cancelled.
    private func assertFailsAndCancels(
        _ load: @escaping @Sendable (PagedStore<String, Int, Int>) async throws -> StoreResponse<PagedList<Int, Int>>,
        line: UInt = #line
    ) async {
        let (feeds, pages) = makePagedStore()
        let failing = Task { try await load(feeds) }
        await waitUntil { pages.loadCount == 1 }
        pages.fail(with: Refused(), at: 0)
        await assertThrows(try await ended(failing)) { XCTAssertEqual($0 as? Refused, Refused(), line: line) }

        let cancelled = Task { try await load(feeds) }
        await waitUntil { pages.loadCount == 2 }
        cancelled.cancel()
        await assertThrows(try await ended(cancelled)) { XCTAssertTrue($0 is CancellationError, line: line) }
        XCTAssertEqual(pages.cancelledRequests, [1], "its only caller left: the request is cancelled", line: line)
    }

    // MARK: Caches

    func test_keyedCache_awaitForms_returnWhatTheCallbacksReceive() async throws {
        let disk = MemoryCache<String, Person>()
        try await disk.save(Person(id: "u1", name: "Ada"), for: "u1")
        // Sample: begin
        let friend = try await disk.value(for: "u1").value
        // Sample: end
        XCTAssertEqual(friend, Person(id: "u1", name: "Ada"))

        let lastWeek = Date(timeIntervalSinceNow: -7 * 24 * 3600)
        try await disk.save(Person(id: "u1", name: "Ada L."), for: "u1", savedAt: lastWeek)
        let dated = try await disk.value(for: "u1")
        XCTAssertEqual(dated.value.name, "Ada L.")
        XCTAssertEqual(dated.savedAt.timeIntervalSince1970, lastWeek.timeIntervalSince1970, accuracy: 0.001)

        try await disk.removeValue(for: "u1")
        await assertThrows(try await disk.value(for: "u1")) { XCTAssertTrue($0 is CacheMiss) }
        try await disk.save(Person(id: "u2", name: "Grace"), for: "u2")
        try await disk.removeAll()
        XCTAssertEqual(disk.count, 0)
    }

    func test_keyedCache_awaitForms_throwTheCachesError() async {
        let cache = AnsweringCache()
        cache.failure = Refused()
        await assertThrows(try await cache.value(for: "a")) { XCTAssertEqual($0 as? Refused, Refused()) }
        await assertThrows(try await cache.save("1", for: "a")) { XCTAssertEqual($0 as? Refused, Refused()) }
        await assertThrows(try await cache.save("1", for: "a", savedAt: Date())) {
            XCTAssertEqual($0 as? Refused, Refused())
        }
        await assertThrows(try await cache.removeValue(for: "a")) {
            XCTAssertEqual($0 as? Refused, Refused())
        }
        await assertThrows(try await cache.removeAll()) { XCTAssertEqual($0 as? Refused, Refused()) }
    }

    func test_keyedCache_awaitForms_cancelled_endTheWaitAtOnce_andTheOperationGoesOn() async {
        let cache = AnsweringCache()
        cache.holds = true
        let operations: [@Sendable () async throws -> Void] = [
            { _ = try await cache.value(for: "a") }, { try await cache.save("1", for: "a") },
            { try await cache.save("1", for: "a", savedAt: Date()) }, { try await cache.removeValue(for: "a") },
            { try await cache.removeAll() },
        ]
        for (index, operation) in operations.enumerated() {
            let waiting = Task { try await operation() }
            await waitUntil { cache.heldCount == index + 1 }
            waiting.cancel()
            await assertThrows(try await ended(waiting)) { XCTAssertTrue($0 is CancellationError) }
        }
        XCTAssertEqual(cache.heldCount, 5, "each still under way, for the cache to complete")
    }

    func test_cacheSave_returnsOnceStored_throwsItsError_andCancelledEndsTheWait() async throws {
        let cache = CacheSpy<String>(completingWith: nil)
        let saving = Task { try await cache.save("1") }
        await waitUntil { cache.savedValues == ["1"] }
        cache.completeSave(with: .success(()), at: 0)
        try await ended(saving)

        let failing = Task { try await cache.save("2") }
        await waitUntil { cache.savedValues.count == 2 }
        cache.completeSave(with: .failure(Refused()), at: 1)
        await assertThrows(try await ended(failing)) { XCTAssertEqual($0 as? Refused, Refused()) }

        let cancelled = Task { try await cache.save("3") }
        await waitUntil { cache.savedValues.count == 3 }
        cancelled.cancel()
        await assertThrows(try await ended(cancelled)) { XCTAssertTrue($0 is CancellationError) }
    }

    // MARK: MutationQueue

    func test_queueEnqueue_returnsOnceSavedAndShown_andOutcome_tellsHowItEnded() async throws {
        let (outbox, store, server) = try makeQueue()
        let showsAtOnce = Task {
            // Sample: begin
            let id = try await outbox.enqueue("u3")
            if case .refused(let error) = try await outbox.outcome(of: id) { show(error) }
            // Sample: end
        }
        await waitUntil { server.loadCount == 1 }
        XCTAssertEqual(shown("all", in: store), ["u1"], "shown once enqueued")
        XCTAssertEqual(outbox.pending.count, 1)
        server.fail(with: Refused(), at: 0)
        try await ended(showsAtOnce)
        XCTAssertEqual(shownErrors.withLock { $0 }, ["Refused()"], "refused, and told")
        XCTAssertEqual(shown("all", in: store), ["u1", "u3"], "undone")

        let accepted = try await outbox.enqueue("u1")
        await waitUntil { server.loadCount == 2 }
        server.complete(with: (), at: 1)
        let outcome = try await ended(Task { try await outbox.outcome(of: accepted) })
        XCTAssertEqual(outcome?.description, "accepted")
        let again = try await outbox.outcome(of: accepted)
        XCTAssertEqual(again?.description, "accepted", "told again once settled")
        let unknown = try await outbox.outcome(of: "never-enqueued")
        XCTAssertNil(unknown, "a mutation the queue never held")
    }

    func test_queueEnqueue_failedSave_throwsTheStoragesError_andKnowsNoMutation() async {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        let outbox = try? MutationQueue(
            store: store, storage: FailingStorage(), key: { _ in "all" }, change: { id, list in list },
            send: { _, _ in LoaderSpy<Void>() }, isRefused: { _ in true })

        await assertThrows(try await outbox?.enqueue("u3")) {
            XCTAssertEqual(($0 as? URLError)?.code, .cannotWriteToFile)
        }
        XCTAssertEqual(outbox?.pending.count, 0)
    }

    func test_queueEnqueue_cancelledBeforeItStarts_enqueuesNothing() async throws {
        let (outbox, _, server) = try makeQueue()
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await outbox.enqueue("u3")
        }

        await assertThrows(try await ended(cancelled)) { XCTAssertTrue($0 is CancellationError) }
        XCTAssertEqual(outbox.pending.count, 0)
        XCTAssertEqual(server.loadCount, 0)
    }

    func test_queueOutcome_cancelled_endsTheWait_andTheMutationGoesOn() async throws {
        let (outbox, store, server) = try makeQueue()
        let id = try await outbox.enqueue("u3")
        await waitUntil { server.loadCount == 1 }

        let waiting = Task { try await outbox.outcome(of: id) }
        await waitUntil { outbox.pending.first?.attempts == 1 }
        waiting.cancel()
        await assertThrows(try await ended(waiting)) { XCTAssertTrue($0 is CancellationError) }
        XCTAssertEqual(server.cancelledRequests, [], "the mutation is still being sent")
        server.complete(with: (), at: 0)
        try await ended(Task { try await outbox.waitUntilSettled() })
        XCTAssertEqual(shown("all", in: store), ["u1"])
    }

    func test_queueWaitUntilSettled_returnsOnceEveryMutationSettled_andCancelledEndsTheWait() async throws {
        let (outbox, store, server) = try makeQueue()
        try await outbox.waitUntilSettled()  // none pending: at once
        try await outbox.enqueue("u3")
        try await outbox.enqueue("u1")

        let settling = Task {
            // Sample: begin
            try await outbox.waitUntilSettled()
            // Sample: end
        }
        let cancelled = Task { try await outbox.waitUntilSettled() }
        await waitUntil { server.loadCount == 1 }
        cancelled.cancel()
        await assertThrows(try await ended(cancelled)) { XCTAssertTrue($0 is CancellationError) }
        server.complete(with: (), at: 0)
        await waitUntil { server.loadCount == 2 }
        XCTAssertTrue(outbox.isMutating, "one left")
        server.fail(with: Refused(), at: 1)
        try await ended(settling)

        XCTAssertFalse(outbox.isMutating)
        XCTAssertEqual(shown("all", in: store), ["u1"], "u3 deleted, the deletion of u1 refused")
    }

    // MARK: Helpers

    private final class FriendsAPI: Sendable {
        let commits = LoaderSpy<Void>()
        func deleteFriend(_ id: String) -> LoaderSpy<Void> { commits }
    }

    private final class PeopleAPI: Sendable {
        let commits = LoaderSpy<Void>()
        func rename(_ id: String, to name: String) -> LoaderSpy<Void> { commits }
    }

    private func makeStore() -> (Store<String, [String]>, MemoryCache<String, [String]>) {
        let level = MemoryCache<String, [String]>()
        let store = Store<String, [String]>(
            levels: [.cache(level, name: "memory")], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        return (store, level)
    }

    private func makeEntities() -> (SharedEntities<Person>, Store<Int, [Person]>, Store<String, Person>) {
        let entities = SharedEntities<Person>()
        let lists = Store<Int, [Person]>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { _ in LoaderSpy<[Person]>() },
            entities: entities.held(in: .elements))
        let details = Store<String, Person>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { _ in LoaderSpy<Person>() },
            entities: entities.held(in: .whole))
        lists.write([Person(id: "u1", name: "Ada"), Person(id: "u2", name: "Grace")], for: 1)
        details.write(Person(id: "u1", name: "Ada"), for: "u1")
        return (entities, lists, details)
    }

    private func makePagedStore() -> (PagedStore<String, Int, Int>, LoaderSpy<Page<Int, Int>>) {
        let pages = LoaderSpy<Page<Int, Int>>()
        let feeds = PagedStore(levels: [.cache(MemoryCache<String, PagedList<Int, Int>>(), name: "memory")]) {
            (_: String, _: Int?) in pages
        }
        return (feeds, pages)
    }

    private typealias Outbox = MutationQueue<String, [String], String>

    private func makeQueue() throws -> (Outbox, Store<String, [String]>, LoaderSpy<Void>) {
        let folder = try makeTemporaryFolder("await-queue")
        let (store, _) = makeStore()
        store.write(["u1", "u3"], for: "all")
        let server = LoaderSpy<Void>()
        let outbox = try MutationQueue(
            store: store, storage: FileMutationStorage<String>(directory: folder), key: { _ in "all" },
            change: { id, list in list?.filter { $0 != id } }, send: { _, _ in server },
            isRefused: { $0 is Refused })
        return (outbox, store, server)
    }

    /// What `store` shows for `key` now.
    private func shown<Key: Hashable & Sendable, Value: Sendable>(_ key: Key, in store: Store<Key, Value>) -> Value? {
        valueShown(key, in: store)
    }

    /// Waits for `task` to end, failing and cancelling it when the watchdog runs out first, and returns its value.
    private func ended<T: Sendable>(_ task: Task<T, any Error>) async throws -> T {
        let done = expectation(description: "the task ended")
        let watcher = Task {
            _ = await task.result
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: .watchdog)
        task.cancel()  // only when the watchdog ran out: ended already otherwise
        await watcher.value
        return try await task.value
    }

    /// Checks that `expression` throws, and hands `check` the error.
    private func assertThrows<T>(
        _ expression: @autoclosure () async throws -> T, file: StaticString = #filePath, line: UInt = #line,
        _ check: (any Error) -> Void
    ) async {
        do {
            _ = try await expression()
            XCTFail("no error thrown", file: file, line: line)
        } catch {
            check(error)
        }
    }

    /// Waits (a watchdog, not a pace) until `condition` holds.
    private func waitUntil(_ condition: @escaping @Sendable () -> Bool) async {
        let held = await eventuallyAsync { condition() }
        XCTAssertTrue(held, "the watchdog ran out")
    }
}

/// What `store` shows for `key` now.
private func valueShown<Key: Hashable & Sendable, Value: Sendable>(_ key: Key, in store: Store<Key, Value>) -> Value? {
    store.state(for: key).value
}

/// The errors the queue's sample showed.
private let shownErrors = Locked<[String]>([])

private func show(_ error: any Error) {
    shownErrors.withLock { $0.append("\(error)") }
}

/// A cache that answers each call with `failure` (else as an empty memory cache would), or holds it while `holds`.
private final class AnsweringCache: KeyedCache, Sendable {
    private let state = Locked<(failure: (any Error)?, holds: Bool, held: [@Sendable () -> Void])>((nil, false, []))

    var failure: (any Error)? {
        get { state.withLock { $0.failure } }
        set { state.withLock { $0.failure = newValue } }
    }

    var holds: Bool {
        get { state.withLock { $0.holds } }
        set { state.withLock { $0.holds = newValue } }
    }

    var heldCount: Int { state.withLock { $0.held.count } }

    private func answer<T: Sendable>(
        _ success: T, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let failure = state.withLock { state -> (any Error)?? in
            guard !state.holds else {
                state.held.append { completion(.success(success)) }
                return .none
            }
            return .some(state.failure)
        }
        guard let failure else { return }
        completion(failure.map { .failure($0) } ?? .success(success))
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        answer(CachedValue(key, savedAt: Date()), completion)
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        answer((), completion)
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        answer((), completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        answer((), completion)
    }
}
