import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// An app and its extension over one shared disk folder, one change journal and one mutation folder, each with its
/// own store and queue: a change queued in either reaches the server once, and both screens show how it ended.
final class SharedMutationsTests: XCTestCase {
    private var directory: URL!
    private var subscriptions: [any CancellationToken] = []

    override func setUpWithError() throws {
        // A child process works in its parent's folder.
        let parents = ProcessInfo.processInfo.environment[Self.folderVariable].map { URL(fileURLWithPath: $0) }
        directory =
            parents ?? FileManager.default.temporaryDirectory.appendingPathComponent("mutations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        for subscription in subscriptions { subscription.cancel() }
        if ProcessInfo.processInfo.environment[Self.folderVariable] == nil {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// The folder a child process shares with its parent.
    private static let folderVariable = "LOADING_SHARED_MUTATIONS_FOLDER"

    /// The server both processes send to: it counts every request and refuses the items named "refused".
    private final class Server: Sendable {
        private let received = Locked<[String]>([])
        var requests: [String] { received.withLock { $0 } }

        func send(_ item: String) -> AnyLoader<Void> {
            AnyLoader { [received] completion in
                received.withLock { $0.append(item) }
                DispatchQueue.global().async {
                    completion(item == "refused" ? .failure(URLError(.badServerResponse)) : .success(()))
                }
                return AnyCancellationToken {}
            }
        }
    }

    private struct Process {
        let store: Store<String, [String]>
        let queue: MutationQueue<String, [String], String>
        let shown: Locked<[[String]?]>
    }

    private func makeProcess(
        server: Server, connectivity: ManualConnectivity, polling: Duration = .milliseconds(20),
        queueFolder: String = "queued"
    ) throws -> Process {
        let store = Store<String, [String]>(
            levels: [
                .cache(MemoryCache(), name: "memory"),
                .cache(DiskCache(directory: directory.appendingPathComponent("shared")), name: "shared"),
            ],
            fetch: LoaderFamily { _ in
                AnyLoader { completion in
                    completion(.failure(URLError(.notConnectedToInternet)))
                    return AnyCancellationToken {}
                }
            },
            sharing: try .journal(
                at: directory.appendingPathComponent("changes.journal"), sharedLevel: "shared", polling: polling))
        let queue = try MutationQueue(
            store: store,
            storage: FileMutationStorage<String>(directory: directory.appendingPathComponent(queueFolder)),
            connectivity: connectivity, retryDelays: .constant(.milliseconds(20)), key: { _ in "list" },
            change: { item, list in (list ?? []) + [item] },
            send: { item, _ in server.send(item) },
            isRefused: { _ in true })
        let shown = Locked<[[String]?]>([])
        let subscription = store.changes(for: "list").sink { response in shown.withLock { $0.append(response.value) } }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return Process(store: store, queue: queue, shown: shown)
    }

    private func enqueue(_ item: String, in process: Process) -> Locked<Result<Void, any Error>?> {
        let outcome = Locked<Result<Void, any Error>?>(nil)
        XCTAssertNoThrow(try process.queue.enqueue(item) { result in outcome.withLock { $0 = result } })
        return outcome
    }

    func test_aChangeQueuedInOneProcess_isSentOnce_andBothScreensShowHowItEnded() throws {
        let server = Server()
        let online = ManualConnectivity(isOnline: true)
        let app = try makeProcess(server: server, connectivity: online)
        let widget = try makeProcess(server: server, connectivity: online)

        let accepted = enqueue("accepted", in: widget)
        XCTAssertTrue(eventually { accepted.withLock { $0 } != nil })
        XCTAssertNoThrow(try accepted.withLock { $0 }?.get())
        let start = ContinuousClock.now
        XCTAssertTrue(eventually { app.shown.withLock { $0.last } == ["accepted"] })
        print("the app showed the extension's confirmed change \(ContinuousClock.now - start) after it ended")

        let refused = enqueue("refused", in: widget)
        XCTAssertTrue(eventually { refused.withLock { $0 } != nil })
        XCTAssertThrowsError(try refused.withLock { $0 }?.get(), "the server refused it")
        XCTAssertEqual(widget.shown.withLock { $0.last }, ["accepted"], "undone where it was made")
        // A change confirmed after the refusal: once the app shows it, it learnt everything shared before it.
        let later = enqueue("later", in: widget)
        XCTAssertTrue(eventually { later.withLock { $0 } != nil })
        XCTAssertTrue(eventually { app.shown.withLock { $0.last } == ["accepted", "later"] })
        XCTAssertFalse(app.shown.withLock { $0.contains { $0?.contains("refused") == true } }, "never shown elsewhere")
        XCTAssertEqual(
            server.requests, ["accepted", "refused", "later"], "each sent once, by the process that queued it")
    }

    /// The extension holds a change of its own, offline, when the app's confirmed change of the same key comes: the
    /// extension shows the app's change with its own on top, and both once its own is sent.
    func test_aChangeConfirmedElsewhere_isShownUnderTheChangesStillQueuedHere() throws {
        let server = Server()
        let offline = ManualConnectivity(isOnline: false)
        let widget = try makeProcess(server: server, connectivity: offline)
        _ = enqueue("w", in: widget)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["w"] })

        let app = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: true))
        // The app's queue sends the extension's change first (it found it in the folder), then its own.
        let appChange = enqueue("a", in: app)
        XCTAssertTrue(eventually { appChange.withLock { $0 } != nil })
        XCTAssertEqual(app.shown.withLock { $0.last }, ["w", "a"])
        XCTAssertTrue(
            eventually { widget.shown.withLock { $0.last }??.contains("a") == true },
            "the extension shows the app's change: \(widget.shown.withLock { $0 })")
        offline.setOnline(true)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["w", "a"] })
        XCTAssertEqual(server.requests, ["w", "a"])
    }

    /// A logout in the app: the extension drops the old user's changes it holds (its own folder), unsent, unshown.
    func test_aLogoutInAnotherProcess_dropsTheOldUsersChangesHere_neitherSentNorShownNorKept() throws {
        let server = Server()
        let offline = ManualConnectivity(isOnline: false)
        let widget = try makeProcess(server: server, connectivity: offline, queueFolder: "widget-queue")
        let old = enqueue("old user's", in: widget)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["old user's"] })
        let app = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: true))

        app.store.clear()

        XCTAssertTrue(eventually { old.withLock { $0 } != nil }, "the extension dropped the old user's change")
        XCTAssertThrowsError(try old.withLock { $0 }?.get()) { XCTAssertEqual($0 as? StoreError, .cleared) }
        XCTAssertFalse(widget.queue.isMutating)
        XCTAssertEqual(
            try FileMutationStorage<String>(directory: directory.appendingPathComponent("widget-queue")).loadAll()
                .count, 0, "nor kept")
        XCTAssertNotEqual(widget.shown.withLock { $0.last }, ["old user's"], "nor shown")
        offline.setOnline(true)
        let next = enqueue("probe", in: widget)  // once it is sent, anything sent before it was
        XCTAssertTrue(eventually { next.withLock { $0 } != nil })
        XCTAssertEqual(server.requests, ["probe"], "the old user's change is never sent")
    }

    /// A logout in the app, and the next user's change made in the extension before it polled the journal: the
    /// change learns the logout first, so it is the next user's, kept and sent.
    func test_aChangeMadeAfterALogoutInAnotherProcess_isTheNextUsers_keptAndSent() throws {
        let server = Server()
        let offline = ManualConnectivity(isOnline: false)
        let widget = try makeProcess(
            server: server, connectivity: offline, polling: .seconds(3_600), queueFolder: "widget-queue")
        let old = enqueue("old user's", in: widget)
        let app = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: true))
        let loggedOut = expectation(description: "the app's logout ended")
        app.store.clear { loggedOut.fulfill() }
        wait(for: [loggedOut], timeout: .watchdog)

        let new = enqueue("next user's", in: widget)  // the extension has not polled: the enqueue reads the journal

        XCTAssertThrowsError(try old.withLock { $0 }?.get(), "the old user's change was dropped first") {
            XCTAssertEqual($0 as? StoreError, .cleared)
        }
        XCTAssertEqual(widget.queue.pending.map(\.input), ["next user's"])
        XCTAssertEqual(widget.shown.withLock { $0.last }, ["next user's"])
        offline.setOnline(true)
        XCTAssertTrue(eventually { new.withLock { $0 } != nil })
        XCTAssertNoThrow(try new.withLock { $0 }?.get())
        XCTAssertEqual(server.requests, ["next user's"])
    }

    /// The same, with the extension a real child process: it queues a change, the app (this process) logs out, and
    /// the change the extension makes next, before polling the journal, is the next user's, kept alone.
    func test_aChangeMadeInAnotherProcessAfterALogoutHere_isTheNextUsers_keptAlone() throws {
        let app = try makeProcess(server: Server(), connectivity: ManualConnectivity(isOnline: false)).store
        let loggedOut = Locked<String?>(nil)
        let parent = DispatchGroup()
        DispatchQueue.global().async(group: parent) { [directory] in
            let ready = directory!.appendingPathComponent("widget-ready").path
            guard eventually({ FileManager.default.fileExists(atPath: ready) }) else {
                return loggedOut.withLock { $0 = "the child never queued its change" }
            }
            let done = DispatchSemaphore(value: 0)
            app.clear { done.signal() }
            guard done.wait(timeout: .now() + .watchdog) == .success else {
                return loggedOut.withLock { $0 = "the logout never ended" }
            }
            _ = FileManager.default.createFile(
                atPath: directory!.appendingPathComponent("logged-out").path, contents: nil)
        }

        let pending = try runChildUntilKilled(
            "SharedMutationsTests/test_makesChangesAroundALogout_whenStartedByTheSharingTests",
            environment: [Self.folderVariable: directory.path])
        parent.wait()

        XCTAssertNil(loggedOut.withLock { $0 })
        XCTAssertEqual(pending, "next user's", "the child's queue holds the next user's change alone")
        XCTAssertEqual(
            try FileMutationStorage<String>(directory: directory.appendingPathComponent("widget-queue")).loadAll()
                .map(\.input), ["next user's"], "and so does its folder")
    }

    func test_makesChangesAroundALogout_whenStartedByTheSharingTests() throws {
        guard ProcessInfo.processInfo.environment[Self.folderVariable] != nil else {
            throw XCTSkip("the child process of SharedMutationsTests: it runs only when that test starts it")
        }
        let widget = try makeProcess(
            server: Server(), connectivity: ManualConnectivity(isOnline: false), polling: .seconds(3_600),
            queueFolder: "widget-queue")
        _ = enqueue("old user's", in: widget)
        _ = FileManager.default.createFile(atPath: directory.appendingPathComponent("widget-ready").path, contents: nil)
        let loggedOut = directory.appendingPathComponent("logged-out").path
        guard eventually({ FileManager.default.fileExists(atPath: loggedOut) }) else {
            sayKillNow("the parent never logged out")
            return waitToBeKilled()
        }
        _ = enqueue("next user's", in: widget)
        sayKillNow(widget.queue.pending.map(\.input).joined(separator: ","))
        waitToBeKilled()
    }

    /// The extension, offline, holds a change the app sent for it: when the extension learns the app's value, it lets
    /// go of its own copy at once (still offline), and never shows the change twice.
    func test_aChangeAnotherProcessSent_isLetGoOfHere_whenItsValueArrives_evenOffline() throws {
        let server = Server()
        let widget = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: false))
        let queued = enqueue("from the extension", in: widget)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["from the extension"] })

        let app = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: true))
        XCTAssertTrue(eventually { !app.queue.isMutating }, "the app sent what it found")

        XCTAssertTrue(eventually { queued.withLock { $0 } != nil }, "the extension let go of its copy, offline")
        XCTAssertThrowsError(try queued.withLock { $0 }?.get()) { error in
            XCTAssertEqual(error as? MutationQueueError, .sentByAnotherProcess)
        }
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["from the extension"] })
        XCTAssertFalse(widget.queue.isMutating)
        XCTAssertFalse(
            widget.shown.withLock { $0 }.contains { $0?.filter { $0 == "from the extension" }.count ?? 0 > 1 },
            "shown once, never twice: \(widget.shown.withLock { $0 })")
        XCTAssertEqual(server.requests, ["from the extension"], "sent once")
    }

    /// The extension queues a change offline and is not heard of again; the app, started next, sends it. The
    /// extension's queue, back online, finds it sent and undoes its own copy: both show it once.
    func test_aChangeQueuedByAnotherProcess_isSentOnceByTheOther_andBothScreensShowIt() throws {
        let server = Server()
        let offline = ManualConnectivity(isOnline: false)
        let widget = try makeProcess(server: server, connectivity: offline)
        let queued = enqueue("from the extension", in: widget)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["from the extension"] })

        let app = try makeProcess(server: server, connectivity: ManualConnectivity(isOnline: true))
        XCTAssertTrue(eventually { !app.queue.isMutating }, "the app sent what it found")
        XCTAssertEqual(app.shown.withLock { $0.last }, ["from the extension"])

        offline.setOnline(true)
        XCTAssertTrue(eventually { queued.withLock { $0 } != nil })
        XCTAssertThrowsError(try queued.withLock { $0 }?.get()) { error in
            XCTAssertEqual(error as? MutationQueueError, .sentByAnotherProcess)
        }
        // A change the app confirms next: once the extension shows it, it learnt everything shared before it.
        let next = enqueue("next", in: app)
        XCTAssertTrue(eventually { next.withLock { $0 } != nil })
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == ["from the extension", "next"] })
        XCTAssertFalse(
            widget.shown.withLock { $0 }.contains { $0?.filter { $0 == "from the extension" }.count ?? 0 > 1 },
            "shown once, never twice: \(widget.shown.withLock { $0 })")
        XCTAssertEqual(app.shown.withLock { $0.last }, ["from the extension", "next"])
        XCTAssertEqual(server.requests, ["from the extension", "next"], "sent once")
    }
}
