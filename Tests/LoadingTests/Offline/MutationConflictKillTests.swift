import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A conflict survives a kill between the server's answer and the app's: a child process (this test binary, run on
/// ``MutationConflictKillChild``) sends a removal the server answers with a conflict and its copy, and is killed then;
/// the next launch shows the server's copy with the change over it, and each answer ends with the server and the store
/// in the documented state.
final class MutationConflictKillTests: XCTestCase {
    func test_aConflictWaitingForTheApp_eachAnswerAfterAKill_endsWhereItSays() async throws {
        let killed = try runChild(resolvingAtOnce: false)
        // Each answer from the same killed state: a copy of the child's folder.
        let answers: [(ConflictResolution<String>, server: [String])] = [
            (.rebase, ["a", "c", "z"]), (.merge("a"), ["b", "c", "z"]), (.takeServerCopy, ["a", "b", "c", "z"]),
        ]
        for (answer, expected) in answers {
            let folder = try copy(killed)
            let launch = try Launch(folder) { _ in
                XCTFail("the conflict waits for the app: not resolved again")
                return .ask
            }
            XCTAssertEqual(launch.queue.pending.map(\.awaitsResolution), [true], "\(answer)")
            XCTAssertEqual(
                shown(launch.store), ["a", "c", "z"], "the server's copy, kept by the disk level, the change over it")
            XCTAssertEqual(FileServer(folder).sent, 1, "nothing sent again while it waits")

            let id = try XCTUnwrap(launch.queue.pending.first?.id)
            try await launch.queue.resolveConflict(id, with: answer)
            try launch.waitUntilSettled()

            XCTAssertEqual(FileServer(folder).list, expected, "\(answer)")
            XCTAssertEqual(shown(launch.store), expected, "\(answer): the store agrees with the server")
            XCTAssertEqual(try launch.storage.loadAll().count, 0, "\(answer)")
        }
    }

    func test_killedWhileTheAppResolves_theNextLaunchMeetsTheConflictAgain_andResolvesIt() throws {
        let folder = try runChild(resolvingAtOnce: true)

        let launch = try Launch(folder) { conflict in
            XCTAssertEqual(conflict.serverCopy, ["a", "b", "c", "z"])
            return .rebase
        }
        try launch.waitUntilSettled()

        XCTAssertEqual(FileServer(folder).list, ["a", "c", "z"])
        XCTAssertEqual(shown(launch.store), ["a", "c", "z"])
        XCTAssertEqual(try launch.storage.loadAll().count, 0)
    }

    // MARK: Helpers

    private func runChild(resolvingAtOnce: Bool) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("conflict-kill-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        try FileServer.prepare(folder)
        let said = try runChildUntilKilled(
            "MutationConflictKillChild/test_runsWhenStartedByTheKillTest",
            environment: [
                MutationConflictKillChild.folderVariable: folder.path,
                MutationConflictKillChild.resolvingVariable: resolvingAtOnce ? "1" : "0",
            ])
        XCTAssertNotNil(said, "the child met the conflict, and was killed then")
        return folder
    }

    /// What the store shows, read through its disk level.
    private func shown(_ store: Store<String, [String]>) -> [String]? {
        awaitResponse(store.read("list", policy: .cacheOnly))?.value
    }

    private func copy(_ folder: URL) throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("conflict-copy-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: copy) }
        try FileManager.default.copyItem(at: folder, to: copy)
        return copy
    }

    /// One launch of the app over `folder`: the store with its disk level, and the queue.
    private struct Launch {
        let store: Store<String, [String]>
        let storage: FileMutationStorage<String>
        let queue: MutationQueue<String, [String], String>

        init(
            _ folder: URL,
            resolve: @escaping @Sendable (MutationConflict<[String], String>) -> ConflictResolution<String>
        ) throws {
            (store, storage, queue) = try MutationConflictKillChild.makeApp(folder, resolve: resolve)
        }

        func waitUntilSettled() throws {
            let settled = XCTestExpectation(description: "settled")
            let queue = queue
            Task {
                try await queue.waitUntilSettled()
                settled.fulfill()
            }
            XCTAssertEqual(XCTWaiter.wait(for: [settled], timeout: .watchdog), .completed)
        }
    }
}

/// The child side of ``MutationConflictKillTests``: skipped unless run by it.
final class MutationConflictKillChild: XCTestCase {
    static let folderVariable = "LOADING_CONFLICT_KILL_FOLDER"
    /// "1": killed inside the app's resolver; "0": the resolver asks the app, and the kill comes once that is saved.
    static let resolvingVariable = "LOADING_CONFLICT_KILL_RESOLVING"

    /// The app over `folder`: a store of one list with a disk level, and a queue of removals sent to the server kept
    /// in the folder, which answers the first with a conflict.
    static func makeApp(
        _ folder: URL, resolve: @escaping @Sendable (MutationConflict<[String], String>) -> ConflictResolution<String>
    ) throws -> (Store<String, [String]>, FileMutationStorage<String>, MutationQueue<String, [String], String>) {
        let server = FileServer(folder)
        let store = Store<String, [String]>(
            levels: [
                .cache(DiskCache<String, [String]>(directory: folder.appendingPathComponent("cache")), name: "disk")
            ],
            fetch: LoaderFamily { _ in
                AnyLoader { completion in
                    completion(.success(server.list))
                    return AnyCancellationToken {}
                }
            })
        let storage = FileMutationStorage<String>(directory: folder.appendingPathComponent("outbox"))
        let queue = try MutationQueue(
            store: store, storage: storage, key: { _ in "list" },
            change: { item, list in list?.filter { $0 != item } },
            send: { item, idempotencyKey in
                AnyLoader<Void> { completion in
                    completion(server.remove(item, idempotencyKey: idempotencyKey))
                    return AnyCancellationToken {}
                }
            },
            isRefused: { _ in false },
            conflicts: MutationConflicts(serverCopy: { error, _ in (error as? Conflict)?.copy }, resolve: resolve))
        return (store, storage, queue)
    }

    func test_runsWhenStartedByTheKillTest() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.folderVariable] else {
            throw XCTSkip("the child process of MutationConflictKillTests: it runs only when that test starts it")
        }
        let folder = URL(fileURLWithPath: path)
        let resolvingAtOnce = ProcessInfo.processInfo.environment[Self.resolvingVariable] == "1"
        let (store, _, queue) = try Self.makeApp(folder) { _ in
            guard resolvingAtOnce else { return .ask }
            ChildTest.say(killNowMarker + "resolving")
            ChildTest.waitToBeKilled()
            return .ask
        }
        store.write(["a", "b", "c"], for: "list")
        let flushed = expectation(description: "flushed")
        store.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)
        let id = try queue.enqueue("b")  // the server answers at once, with a conflict
        XCTAssertEqual(queue.pending.first?.awaitsResolution, true)
        let saved = expectation(description: "the server's copy saved")
        store.flush { saved.fulfill() }
        wait(for: [saved], timeout: .watchdog)
        sayKillNow("conflicted \(id)")
        waitToBeKilled()
    }
}

/// A server kept in a folder: its list, which someone else changed ("z" added), whether the next removal meets that
/// change as a conflict (once), and the answer given to each idempotency key (a request sent again gets it again).
struct FileServer {
    let folder: URL

    init(_ folder: URL) {
        self.folder = folder
    }

    /// A server that answers the first removal with a conflict.
    static func prepare(_ folder: URL) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let server = FileServer(folder)
        try server.save(Saved(list: ["a", "b", "c", "z"], sent: 0, conflicted: []))
        try Data().write(to: server.conflictFlag)
    }

    var list: [String] { state.list }
    var sent: Int { state.sent }

    /// Removes `item`, unless the conflict is still to come, or was the answer to `idempotencyKey`: then it answers
    /// with its copy.
    func remove(_ item: String, idempotencyKey: String) -> Result<Void, any Error> {
        var state = state
        state.sent += 1
        if state.conflicted.contains(idempotencyKey) || FileManager.default.fileExists(atPath: conflictFlag.path) {
            try? FileManager.default.removeItem(at: conflictFlag)
            state.conflicted.insert(idempotencyKey)
            try? save(state)
            return .failure(Conflict(copy: state.list))
        }
        state.list.removeAll { $0 == item }
        return Result { try save(state) }
    }

    private var conflictFlag: URL { folder.appendingPathComponent("server-conflict") }
    private var stateFile: URL { folder.appendingPathComponent("server.json") }

    private var state: Saved {
        guard let data = try? Data(contentsOf: stateFile),
            let saved = try? JSONDecoder().decode(Saved.self, from: data)
        else { return Saved(list: [], sent: 0, conflicted: []) }
        return saved
    }

    private func save(_ state: Saved) throws {
        try JSONEncoder().encode(state).write(to: stateFile, options: .atomic)
    }

    private struct Saved: Codable {
        var list: [String]
        var sent: Int
        /// The idempotency keys answered with a conflict.
        var conflicted: Set<String>
    }
}
