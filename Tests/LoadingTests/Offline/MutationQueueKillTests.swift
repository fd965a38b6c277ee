import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A mutation queue survives its process being killed: a child process (this test binary, run on
/// ``MutationQueueKillChild``) enqueues mutations while offline, says so, and is killed with SIGKILL at that moment;
/// the next launch shows them again and sends them in order, with the idempotency keys they were made with.
final class MutationQueueKillTests: XCTestCase {
    func test_mutationsQueuedOffline_surviveAKill_andReplayInOrderOnceOnline() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kill-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }

        let said = try runChildUntilKilled(directory: directory)
        let ids = try XCTUnwrap(said?.split(separator: " ").dropFirst().map(String.init))
        XCTAssertEqual(ids.count, 2, "the child said: \(said ?? "nothing")")

        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        let connectivity = ManualConnectivity(isOnline: false)
        let server = ServerSpy()
        let queue = try MutationQueueKillChild.makeQueue(store, directory, connectivity, server)
        XCTAssertEqual(queue.pending.map(\.id), ids, "the next launch finds both, in order")
        let shown = LoadRecorder<StoreResponse<[String]>>()
        _ = shown.load(store.read("list", policy: .cacheOnly))
        XCTAssertEqual(shown.values.first?.value, ["c"], "and shows them before sending anything")

        connectivity.setOnline(true)
        server.answer(0)
        server.answer(1)

        XCTAssertEqual(server.sent, ["a", "b"])
        XCTAssertEqual(server.keys, ids)
        XCTAssertFalse(queue.isMutating)
    }

    func test_anAttemptCutShortByAKill_isCountedAtTheNextLaunch() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kill-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }

        let said = try runChildUntilKilled(directory: directory, sending: true)
        XCTAssertNotNil(said, "the child sent its mutation, and was killed waiting for the answer")

        let kept = try FileMutationStorage<String>(directory: directory).loadAll()
        XCTAssertEqual(kept.map(\.attempts), [1], "the attempt the kill cut short counts")
    }

    private func runChildUntilKilled(directory: URL, sending: Bool = false) throws -> String? {
        var environment = [MutationQueueKillChild.directoryVariable: directory.path]
        if sending { environment[MutationQueueKillChild.sendingVariable] = "1" }
        return try runChildUntilKilled(
            "MutationQueueKillChild/test_runsWhenStartedByTheKillTest", environment: environment)
    }
}

/// The child side of ``MutationQueueKillTests``: skipped unless run by it.
final class MutationQueueKillChild: XCTestCase {
    static let directoryVariable = "LOADING_KILL_OUTBOX"
    /// Set when the child sends its mutation (online, to a server that never answers) instead of queueing offline.
    static let sendingVariable = "LOADING_KILL_SENDING"

    static func makeQueue(
        _ store: Store<String, [String]>, _ directory: URL, _ connectivity: ManualConnectivity, _ server: ServerSpy
    ) throws -> MutationQueue<String, [String], String> {
        try MutationQueue(
            store: store, storage: FileMutationStorage<String>(directory: directory), connectivity: connectivity,
            key: { _ in "list" }, change: { item, list in list?.filter { $0 != item } },
            send: { item, key in server.send(item, key) }, isRefused: { $0 is Refused })
    }

    func test_runsWhenStartedByTheKillTest() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.directoryVariable] else {
            throw XCTSkip("the child process of MutationQueueKillTests: it runs only when that test starts it")
        }
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        if ProcessInfo.processInfo.environment[Self.sendingVariable] != nil {
            let server = ServerSpy()
            let queue = try Self.makeQueue(store, URL(fileURLWithPath: path), ManualConnectivity(), server)
            let id = try queue.enqueue("a")
            XCTAssertEqual(server.sent, ["a"])
            sayKillNow("sending \(id)")
            waitToBeKilled()
            return
        }
        let queue = try Self.makeQueue(
            store, URL(fileURLWithPath: path), ManualConnectivity(isOnline: false), ServerSpy())
        let first = try queue.enqueue("a")
        let second = try queue.enqueue("b")
        sayKillNow("queued \(first) \(second)")
        waitToBeKilled()
    }
}
