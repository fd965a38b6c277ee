import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A queued mutation the server answers with a conflict and its own copy: the copy is confirmed under the change, and
/// the app's resolution decides what the server and the store end with.
final class MutationConflictTests: XCTestCase {
    /// What the server holds now: "z" was added by someone else.
    private let serverCopy = ["a", "b", "c", "z"]

    func test_rebase_showsTheChangeOverTheServersCopy_andSendsItAgainWithAKeyOfItsOwn() throws {
        let (store, storage, server) = makeEnvironment()
        let resolved = Locked<[MutationConflict<[String], String>]>([])
        let queue = try makeSUT(store, storage, server) { conflict in
            resolved.withLock { $0.append(conflict) }
            return .rebase
        }
        let outcome = LoadRecorder<Void>()
        let id = try queue.enqueue("b") { outcome.record($0) }

        server.conflict(0, copy: serverCopy)

        let conflict = try XCTUnwrap(resolved.withLock { $0.first })
        XCTAssertEqual(conflict.id, id)
        XCTAssertEqual(conflict.input, "b")
        XCTAssertEqual(conflict.serverCopy, serverCopy)
        XCTAssertEqual(conflict.shown, ["a", "c"], "what the user saw")
        XCTAssertEqual(shownList(store), ["a", "c", "z"], "the change applied again over the server's copy")
        XCTAssertEqual(server.sent, ["b", "b"], "sent again at once")
        XCTAssertEqual(server.keys, [id, "\(id).1"], "a new request: an idempotency key of its own")
        XCTAssertEqual(try storage.loadAll().map(\.resends), [1], "the resend is on disk")

        server.answer(1)

        XCTAssertEqual(outcome.count, 1)
        XCTAssertEqual(confirmedList(store), ["a", "c", "z"], "the rebased change joins the server's copy")
        XCTAssertEqual(try storage.loadAll().count, 0)
        XCTAssertFalse(queue.isMutating)
    }

    func test_rebase_againstAServerCheckingAVersion_sendsTheInputMadeAnewAgainstItsCopy() throws {
        /// A document at a version; a rename names the version it was made against.
        struct Document: Equatable, Sendable {
            var version: Int
            var title: String
        }
        struct Rename: Equatable, Sendable, Codable {
            var title: String
            var basedOn: Int
        }
        struct Stale: Error {
            let current: Document
        }
        let server = Locked(Document(version: 2, title: "Theirs"))  // renamed on the server since version 1
        let sent = Locked<[Rename]>([])
        let store = Store<String, Document>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Document>() })
        store.write(Document(version: 1, title: "Draft"), for: "doc")
        let queue = try MutationQueue(
            store: store, storage: FileMutationStorage<Rename>(directory: makeQueueDirectory("conflicts")),
            key: { _ in "doc" },
            change: { rename, document in document.map { Document(version: $0.version, title: rename.title) } },
            send: { rename, _ in
                AnyLoader<Void> { completion in
                    sent.withLock { $0.append(rename) }
                    let answer: Result<Void, any Error> = server.withLock { current in
                        guard rename.basedOn == current.version else { return .failure(Stale(current: current)) }
                        current = Document(version: current.version + 1, title: rename.title)
                        return .success(())
                    }
                    completion(answer)
                    return AnyCancellationToken {}
                }
            }, isRefused: { _ in false },
            conflicts: MutationConflicts(
                serverCopy: { error, _ in (error as? Stale)?.current },
                rebasing: { rename, copy in Rename(title: rename.title, basedOn: copy.version) },
                resolve: { _ in .rebase }))

        try queue.enqueue(Rename(title: "Mine", basedOn: 1), completion: { _ in })

        XCTAssertEqual(sent.withLock { $0 }, [Rename(title: "Mine", basedOn: 1), Rename(title: "Mine", basedOn: 2)])
        XCTAssertEqual(server.withLock { $0 }, Document(version: 3, title: "Mine"), "the rebased rename went through")
        XCTAssertEqual(awaitResponse(store.read("doc", policy: .cacheOnly))?.value?.title, "Mine")
        XCTAssertFalse(queue.isMutating)
    }

    func test_takeServerCopy_undoesThisChangeAlone_keepsTheCopy_andSendsTheNext() async throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { _ in .takeServerCopy }
        let outcome = LoadRecorder<Void>()
        let first = try queue.enqueue("b") { outcome.record($0) }
        try await queue.enqueue("c")

        server.conflict(0, copy: serverCopy)

        XCTAssertEqual(shownList(store), ["a", "b", "z"], "the server's copy, with the next change still shown")
        XCTAssertEqual(outcome.errors.first as? MutationConflictError, .replacedByServerCopy)
        XCTAssertEqual(
            outcome.errors.first?.localizedDescription,
            "The change was undone: the server had changed the same data, and its copy was kept.")
        let ended = try await queue.outcome(of: first)
        XCTAssertTrue(isReplacedByServerCopy(ended))
        XCTAssertEqual(server.sent, ["b", "c"], "the next is sent")
        XCTAssertEqual(try storage.loadAll().map(\.input), ["c"], "the conflicted one left the storage")

        server.answer(1)
        XCTAssertEqual(confirmedList(store), ["a", "b", "z"])
    }

    func test_merge_sendsTheInputTheAppComputed_shownOverTheServersCopy() throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { conflict in
            XCTAssertEqual(conflict.input, "b")
            return .merge("z")
        }
        let id = try queue.enqueue("b")

        server.conflict(0, copy: serverCopy)

        XCTAssertEqual(shownList(store), ["a", "b", "c"], "the merged change over the server's copy")
        XCTAssertEqual(server.sent, ["b", "z"])
        XCTAssertEqual(server.keys, [id, "\(id).1"])
        XCTAssertEqual(try storage.loadAll().map(\.input), ["z"], "the merged input is what a restart sends")

        server.answer(1)
        XCTAssertEqual(confirmedList(store), ["a", "b", "c"])
    }

    func test_ask_holdsTheMutationAndTheQueue_untilTheAppAnswers() async throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { _ in .ask }
        let first = try await queue.enqueue("b")
        try await queue.enqueue("c")

        server.conflict(0, copy: serverCopy)

        XCTAssertEqual(queue.pending.map(\.awaitsResolution), [true, false])
        XCTAssertEqual(queue.pending.map(\.status), [.waiting, .waiting])
        XCTAssertTrue(queue.pending.first?.lastError is Conflict)
        XCTAssertEqual(server.sent, ["b"], "nothing after it is sent")
        XCTAssertEqual(shownList(store), ["a", "z"], "both changes shown over the server's copy meanwhile")
        XCTAssertEqual(try storage.loadAll().map(\.awaitsResolution), [true, false], "the wait is on disk")

        try await queue.resolveConflict(first, with: .rebase)

        XCTAssertEqual(queue.pending.map(\.status), [.sending, .waiting])
        XCTAssertEqual(queue.pending.map(\.awaitsResolution), [false, false])
        XCTAssertEqual(server.sent, ["b", "b"])
        server.answer(1)
        server.answer(2)
        XCTAssertEqual(server.sent, ["b", "b", "c"])
        XCTAssertEqual(confirmedList(store), ["a", "z"])
        XCTAssertFalse(queue.isMutating)
    }

    func test_resolvingAMutationNotInConflict_throwsATypedError() async throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { _ in .ask }
        let id = try await queue.enqueue("b")

        let error = await resolutionError(queue, id)
        XCTAssertEqual(error as? MutationConflictError, .noConflict(id: id))
        XCTAssertEqual(error?.localizedDescription, "The change \(id) waits for no conflict to be resolved.")
        XCTAssertEqual(server.sent, ["b"], "sent once, as before")
    }

    func test_aConflictWaitingForTheApp_survivesARestart_andIsResolvedThen() async throws {
        let directory = makeQueueDirectory("conflicts")
        let id: String
        do {
            let (store, _, server) = makeEnvironment()
            let queue = try makeSUT(store, FileMutationStorage(directory: directory), server) { _ in .ask }
            id = try await queue.enqueue("b")
            try await queue.enqueue("c")
            server.conflict(0, copy: serverCopy)
            XCTAssertEqual(queue.pending.first?.awaitsResolution, true)
        }
        // A new launch: the conflict still waits for the app, and holds the queue.
        let (store, storage, server) = makeEnvironment(directory: directory)
        let resolveCalls = Locked(0)
        let queue = try makeSUT(store, storage, server) { _ in
            resolveCalls.withLock { $0 += 1 }
            return .rebase
        }
        XCTAssertEqual(queue.pending.map(\.awaitsResolution), [true, false])
        XCTAssertEqual(server.sent, [], "nothing is sent while the conflict waits")
        XCTAssertEqual(shownList(store), ["a"], "both changes shown again")

        try await queue.resolveConflict(id, with: .takeServerCopy)

        let ended = try await queue.outcome(of: id)
        XCTAssertTrue(isReplacedByServerCopy(ended))
        XCTAssertEqual(shownList(store), ["a", "b"], "this change alone is undone")
        XCTAssertEqual(server.sent, ["c"], "the next goes")
        XCTAssertEqual(resolveCalls.withLock { $0 }, 0, "the app answered; the resolver was not asked again")
        server.answer(0)
        XCTAssertEqual(try storage.loadAll().count, 0)
    }

    func test_aConflictAnsweredAfterALogoutBegan_showsNothingOfTheOldUsersCopy() throws {
        let (store, storage, server) = makeEnvironment()
        let resolveCalls = Locked(0)
        let queue = try makeSUT(store, storage, server) { _ in
            resolveCalls.withLock { $0 += 1 }
            return .rebase
        }
        let outcome = LoadRecorder<Void>()
        try queue.enqueue("b") { outcome.record($0) }
        let cleared = expectation(description: "cleared")

        store.clear { cleared.fulfill() }
        server.conflict(0, copy: serverCopy)  // the answer of the attempt the logout cancelled
        wait(for: [cleared], timeout: .watchdog)

        XCTAssertNil(shownList(store), "the old user's copy is not shown")
        XCTAssertEqual(resolveCalls.withLock { $0 }, 0, "nothing left to resolve")
        XCTAssertEqual(outcome.errors.first as? StoreError, .cleared)
        XCTAssertEqual(try storage.loadAll().count, 0)
        XCTAssertEqual(server.sent, ["b"])
    }

    func test_aLogout_dropsAConflictWaitingForTheApp() async throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { _ in .ask }
        let id = try await queue.enqueue("b")
        server.conflict(0, copy: serverCopy)

        await store.clear()

        XCTAssertEqual(queue.pending.count, 0)
        let ended = try await queue.outcome(of: id)
        XCTAssertEqual(ended.map(String.init(describing:)), "cleared")
        XCTAssertEqual(try storage.loadAll().count, 0, "forgotten on disk too")
        let error = await resolutionError(queue, id)
        XCTAssertEqual(error as? MutationConflictError, .noConflict(id: id))
        XCTAssertNil(shownList(store))
    }

    func test_aFailureWithoutTheServersCopy_isRefusedOrTransientAsBefore() throws {
        let (store, storage, server) = makeEnvironment()
        let queue = try makeSUT(store, storage, server) { _ in
            XCTFail("no conflict to resolve")
            return .ask
        }
        try queue.enqueue("b")
        try queue.enqueue("c")

        server.refuse(0)

        XCTAssertEqual(shownList(store), ["a", "b"], "refused: undone alone")
        XCTAssertEqual(server.sent, ["b", "c"])
    }

    func test_theSamples_resolveAtOnce_orAsTheAppAnswers() async throws {
        let (store, storage, server) = makeEnvironment()
        // Sample: begin
        let conflicts = MutationConflicts<[String], String>(  // a list, and the item a mutation removes
            serverCopy: { error, _ in (error as? Conflict)?.copy },
            resolve: { conflict in conflict.serverCopy.contains(conflict.input) ? .rebase : .takeServerCopy })
        // Sample: end
        let atOnce = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, idempotencyKey in server.send(item, idempotencyKey) }, isRefused: { _ in false },
            conflicts: conflicts)
        try atOnce.enqueue("b", completion: { _ in })
        server.conflict(0, copy: ["a", "c"])  // "b" is gone on the server: its copy is kept
        XCTAssertEqual(shownList(store), ["a", "c"])
        XCTAssertFalse(atOnce.isMutating)

        let asking = try makeSUT(store, makeStorage(), server) { _ in .ask }
        let outbox = asking
        try outbox.enqueue("a", completion: { _ in })
        try outbox.enqueue("c", completion: { _ in })
        server.conflict(1, copy: ["a", "c", "z"])
        // Sample: begin
        for mutation in outbox.pending where mutation.awaitsResolution {
            try await outbox.resolveConflict(mutation.id, with: .rebase)
        }
        // Sample: end
        XCTAssertEqual(server.sent.suffix(2), ["a", "a"], "rebased")
        server.answer(2)
        server.conflict(3, copy: ["c", "z"])
        let id = try XCTUnwrap(outbox.pending.first?.id)
        try await outbox.resolveConflict(id, with: .takeServerCopy)
        XCTAssertEqual(shownList(store), ["c", "z"])
        XCTAssertFalse(outbox.isMutating)
    }

    // MARK: Helpers

    /// What resolving mutation `id` with a rebase throws, `nil` when it throws nothing.
    private func resolutionError(_ queue: MutationQueue<String, [String], String>, _ id: String) async -> (any Error)? {
        do {
            try await queue.resolveConflict(id, with: .rebase)
            return nil
        } catch {
            return error
        }
    }

    private func makeStorage() -> FileMutationStorage<String> {
        FileMutationStorage(directory: makeQueueDirectory("conflicts"))
    }

    private func isReplacedByServerCopy(_ outcome: SettledMutation<String>.Outcome?) -> Bool {
        guard case .refused(let error) = outcome else { return false }
        return error as? MutationConflictError == .replacedByServerCopy
    }

    private func makeEnvironment(
        directory: URL? = nil
    ) -> (Store<String, [String]>, FileMutationStorage<String>, ConflictingServer) {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        let directory = directory ?? makeQueueDirectory("conflicts")
        return (store, FileMutationStorage(directory: directory), ConflictingServer())
    }

    private func makeSUT(
        _ store: Store<String, [String]>, _ storage: some MutationStorage<String>, _ server: ConflictingServer,
        resolve: @escaping @Sendable (MutationConflict<[String], String>) -> ConflictResolution<String>
    ) throws -> MutationQueue<String, [String], String> {
        try MutationQueue(
            store: store, storage: storage, retryDelays: .constant(.seconds(1)), scheduler: TestScheduler(),
            key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, idempotencyKey in server.send(item, idempotencyKey) },
            isRefused: { $0 is Refused || $0 is Conflict },
            conflicts: MutationConflicts(serverCopy: { error, _ in (error as? Conflict)?.copy }, resolve: resolve))
    }

}

/// A server's conflict: the change was made against a copy older than the server's, which comes with the answer.
struct Conflict: Error {
    let copy: [String]
}

/// A server whose answers the test gives one by one, a conflict among them.
final class ConflictingServer: Sendable {
    private let server = ServerSpy()

    var sent: [String] { server.sent }
    var keys: [String] { server.keys }

    func send(_ item: String, _ key: String) -> AnyLoader<Void> { server.send(item, key) }
    func answer(_ index: Int) { server.answer(index) }
    func refuse(_ index: Int) { server.refuse(index) }
    func conflict(_ index: Int, copy: [String]) { server.fail(index, with: Conflict(copy: copy)) }
}
