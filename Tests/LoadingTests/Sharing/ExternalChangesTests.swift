import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Two stores standing for two processes (an app and its widget) over one disk folder, each with its own memory level
/// and its own journal over one file: what one saves, removes or clears reaches the other's observers, and neither
/// writes back what it learns.
final class ExternalChangesTests: XCTestCase {
    private var directory: URL!
    private var subscriptions: [any CancellationToken] = []

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("external-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        for subscription in subscriptions { subscription.cancel() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// A process's side: its store, its memory level, and the shared level as it sees it.
    private struct Process {
        let store: Store<String, String>
        let memory: MemoryCache<String, String>
        let shared: DiskCache<String, String>
    }

    /// What every process records in the journal, read by none of them.
    private func journalReader() throws -> ChangeJournal {
        try ChangeJournal(file: directory.appendingPathComponent("changes.journal"))
    }

    private func makeProcess(in directory: URL? = nil, polling: Duration = .milliseconds(20)) throws -> Process {
        let directory = directory ?? self.directory!
        let memory = MemoryCache<String, String>()
        let shared = DiskCache<String, String>(directory: directory.appendingPathComponent("shared"))
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(shared, name: "shared")],
            fetch: LoaderFamily { (id: String) in
                AnyLoader<String> { completion in
                    completion(.failure(URLError(.notConnectedToInternet)))
                    return AnyCancellationToken {}
                }
            },
            sharing: try .journal(
                at: directory.appendingPathComponent("changes.journal"), sharedLevel: "shared", polling: polling),
            onWriteFailure: { XCTFail("a level write failed: \($0)") })
        return Process(store: store, memory: memory, shared: shared)
    }

    /// What `store` shows for `key`, as an observer sees it.
    private func observe(_ key: String, in store: Store<String, String>) -> Locked<[String?]> {
        let shown = Locked<[String?]>([])
        let subscription = store.changes(for: key).sink { response in shown.withLock { $0.append(response.value) } }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return shown
    }

    private func flush(_ store: Store<String, String>) {
        let flushed = expectation(description: "flushed")
        store.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)
    }

    func test_aWriteInOneProcess_reachesTheOthersObserver_andIsNotWrittenBack() throws {
        let records = try journalReader()
        let app = try makeProcess()
        let widget = try makeProcess()
        let shown = observe("u1", in: widget.store)

        let started = ContinuousClock.now
        app.store.write("Ada", for: "u1")
        XCTAssertTrue(eventually { shown.withLock { $0.last } == "Ada" })
        print("A write reached the other store's observer in \(ContinuousClock.now - started)")

        XCTAssertTrue(
            eventually { (try? widget.memory.cachedValue(for: "u1").get().value) == "Ada" },
            "kept in its faster level (saved there after it was shown): \(widget.memory.cachedValue(for: "u1"))")
        flush(widget.store)
        XCTAssertEqual(
            records.readChanges(), [.saved(Data(#"["u1"]"#.utf8))], "what the widget learnt is not recorded again")
    }

    func test_aChangeConfirmedInOneProcess_reachesTheOthersObserver_andARefusedOneNever() throws {
        let app = try makeProcess()
        let widget = try makeProcess()
        let shown = observe("u1", in: widget.store)
        let refused = expectation(description: "refused")
        app.store.mutate(
            "u1", { _ in "refused" },
            commit: AnyLoader<Void> { completion in
                completion(.failure(URLError(.badServerResponse)))
                return AnyCancellationToken {}
            }, completion: { _ in refused.fulfill() })
        wait(for: [refused], timeout: .watchdog)

        let accepted = expectation(description: "accepted")
        app.store.mutate(
            "u1", { _ in "Ada, renamed" },
            commit: AnyLoader<Void> { completion in
                completion(.success(()))
                return AnyCancellationToken {}
            }, completion: { _ in accepted.fulfill() })
        wait(for: [accepted], timeout: .watchdog)

        XCTAssertTrue(eventually { shown.withLock { $0.last } == "Ada, renamed" })
        XCTAssertFalse(shown.withLock { $0.contains("refused") }, "a change never confirmed is not shared")
    }

    func test_aRemovalInOneProcess_leavesTheOtherShowingNothing() throws {
        let app = try makeProcess()
        let widget = try makeProcess()
        app.store.write("Ada", for: "u1")
        flush(app.store)
        let shown = observe("u1", in: widget.store)
        widget.store.read("u1").load { _ in }
        XCTAssertTrue(eventually { shown.withLock { $0.last } == "Ada" })

        app.store.remove("u1")

        XCTAssertTrue(eventually { shown.withLock { $0.last } == .some(nil) })
        XCTAssertTrue(eventually { widget.memory.count == 0 }, "gone from its faster level too")
    }

    func test_aClearInOneProcess_leavesTheOtherShowingNothing_andNeitherUndoesWhatCameAfter() throws {
        let app = try makeProcess()
        let widget = try makeProcess()
        app.store.write("Ada", for: "u1")
        app.store.write("Grace", for: "u2")
        flush(app.store)
        let first = observe("u1", in: widget.store)
        let second = observe("u2", in: widget.store)
        let third = observe("u3", in: widget.store)
        widget.store.read("u1").load { _ in }
        widget.store.read("u2").load { _ in }
        XCTAssertTrue(eventually { first.withLock { $0.last } == "Ada" && second.withLock { $0.last } == "Grace" })

        let cleared = expectation(description: "cleared")
        app.store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
        app.store.write("Bea", for: "u3")  // the next user
        flush(app.store)

        XCTAssertTrue(
            eventually {
                first.withLock { $0.last } == .some(nil) && second.withLock { $0.last } == .some(nil)
                    && third.withLock { $0.last } == "Bea"
            })
        let kept = expectation(description: "read from the shared level")
        app.shared.value(for: "u3") { result in
            XCTAssertEqual(try? result.get().value, "Bea", "the widget's clear did not empty the shared level")
            kept.fulfill()
        }
        wait(for: [kept], timeout: .watchdog)
    }

    // MARK: Two real processes

    private static let variable = "LOADING_SHARING_CHILD"

    /// The child process (standing for a widget's app) writes a key, has a change of it confirmed, and then clears
    /// its store; this process's observer sees all three, and never the change while it is pending. The two take
    /// turns through the shared level itself: this process answers each step of the child by writing the key "ack",
    /// which the child waits to see before its next step.
    func test_aWriteAConfirmedChangeAndAClearInAnotherProcess_reachThisProcesssObserver() throws {
        let app = try makeProcess()
        let seen = Locked<[String]>([])
        let answered = Locked<Set<String>>([])
        let answer: @Sendable (String) -> Void = { ack in
            guard answered.withLock({ $0.insert(ack).inserted }) else { return }
            DispatchQueue.global().async { app.store.write(ack, for: "ack") }
        }
        let steps = app.store.changes(for: "u1").sink { response in
            let value = response.value ?? "nothing"
            seen.withLock { $0.append("u1: \(value)") }
            switch value {
            case "from the child": answer("written")
            case "confirmed in the child": answer("confirmed")
            default: break
            }
        }
        let marker = app.store.changes(for: "marker").sink { response in
            guard response.value == "sent while pending" else { return }
            seen.withLock { $0.append("marker") }
            answer("pending")
        }
        defer {
            steps.cancel()
            marker.cancel()
        }

        let said = try runChildUntilKilled(
            "ExternalChangesTests/test_writesConfirmsThenClears_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])

        XCTAssertEqual(said, "cleared")
        XCTAssertTrue(eventually { seen.withLock { $0.last } == "u1: nothing" }, "the clear was shown: \(seen)")
        let order = seen.withLock { $0 }.filter { $0 != "u1: nothing" }.reduce(into: [String]()) { order, step in
            if order.last != step { order.append(step) }
        }
        XCTAssertEqual(
            order, ["u1: from the child", "marker", "u1: confirmed in the child"],
            "the write, then what the child wrote while its change was pending, then the change once confirmed")
    }

    func test_writesConfirmsThenClears_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let child = try makeProcess(in: URL(fileURLWithPath: path))
        let acks = observe("ack", in: child.store)
        let parentSays: (String) -> Void = { ack in
            XCTAssertTrue(eventually { acks.withLock { $0.last } == ack }, "the parent said \(ack)")
        }
        child.store.write("from the child", for: "u1")
        parentSays("written")

        // A change held by the server: shown here, not shared. What the child writes meanwhile is.
        let server = DispatchSemaphore(value: 0)
        let accepted = expectation(description: "accepted")
        child.store.mutate(
            "u1", { _ in "confirmed in the child" },
            commit: AnyLoader<Void> { completion in
                DispatchQueue.global().async {
                    server.wait()
                    completion(.success(()))
                }
                return AnyCancellationToken {}
            }, completion: { _ in accepted.fulfill() })
        child.store.write("sent while pending", for: "marker")
        parentSays("pending")
        server.signal()
        wait(for: [accepted], timeout: .watchdog)
        parentSays("confirmed")

        let cleared = expectation(description: "cleared")
        child.store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
        sayKillNow("cleared")
        waitToBeKilled()
    }

    /// What the shared level holds for `key`, read now.
    private func levelValue(_ key: String, in shared: DiskCache<String, String>) -> String? {
        let read = Locked<String??>(nil)
        let done = DispatchSemaphore(value: 0)
        shared.value(for: key) { result in
            read.withLock { $0 = .some(try? result.get().value) }
            done.signal()
        }
        done.wait()
        return read.withLock { $0 } ?? nil
    }

    /// This process and a child write one key 500 times each, at the same time: both end showing the value the
    /// shared level holds, the same one (the write made last, in the order both processes agree on).
    func test_writesFromTwoProcessesAtOnce_endWithBothShowingWhatTheLevelHolds() throws {
        let app = try makeProcess()
        let shown = observe("k", in: app.store)
        let writes = DispatchGroup()
        DispatchQueue.global().async(group: writes) {
            for index in 0..<500 { app.store.write("p\(index)", for: "k") }
            let flushed = DispatchSemaphore(value: 0)
            app.store.flush { flushed.signal() }
            flushed.wait()
        }

        let child = try startChild(
            "ExternalChangesTests/test_writesAtOnceWithItsParent_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])
        defer { child.kill() }
        writes.wait()
        XCTAssertNotNil(child.waitForLine(startingWith: "flushed"), "the child wrote")

        // Both end on one value, the one the level holds (the process whose change is the later one may save it
        // again once it learns the other's: the end comes once that landed).
        let childShows = directory.appendingPathComponent("child-shows")
        var level: String?
        XCTAssertTrue(
            eventually {
                level = levelValue("k", in: app.shared)
                let child = try? String(contentsOf: childShows, encoding: .utf8)
                return level != nil && shown.withLock { $0.last } == .some(level) && child == level
            },
            "both show what the level holds: level \(String(describing: level)), here "
                + "\(String(describing: shown.withLock { $0.last })), child "
                + "\(String(describing: try? String(contentsOf: childShows, encoding: .utf8)))")
    }

    func test_writesAtOnceWithItsParent_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let folder = URL(fileURLWithPath: path)
        let child = try makeProcess(in: folder)
        // What the child shows, for its parent to read: written whole (a rename) at each change.
        let showing = folder.appendingPathComponent("child-shows")
        let subscription = child.store.changes(for: "k").sink { response in
            try? Data((response.value ?? "nothing").utf8).write(to: showing, options: .atomic)
        }
        defer { subscription.cancel() }
        for index in 0..<500 { child.store.write("c\(index)", for: "k") }
        flush(child.store)
        ChildTest.say("flushed")
        waitToBeKilled()
    }

    /// This process and a child take turns writing one key, 1,000 writes in all, each written once the writer shows
    /// the other's last one: every write reaches the other process, and both end showing the last one (the child's),
    /// which the shared level holds.
    func test_writesTakingTurnsBetweenTwoProcesses_endWithBothShowingTheLast() throws {
        let app = try makeProcess(polling: .milliseconds(5))
        let shown = observe("k", in: app.store)
        let turns = Locked<(taken: Int, missed: String?)>((0, nil))
        let writes = DispatchGroup()
        DispatchQueue.global().async(group: writes) { [directory] in
            let ready = directory!.appendingPathComponent("child-ready").path
            guard eventually({ FileManager.default.fileExists(atPath: ready) }) else {
                return turns.withLock { $0.missed = "the child never started" }
            }
            for turn in 0..<Self.turns {
                if turn > 0, !eventually({ shown.withLock { $0.last } == "c\(turn - 1)" }) {
                    return turns.withLock { $0.missed = "this process never showed c\(turn - 1)" }
                }
                app.store.write("p\(turn)", for: "k")
                turns.withLock { $0.taken = turn + 1 }
            }
        }

        let start = ContinuousClock.now
        let childShows = try runChildUntilKilled(
            "ExternalChangesTests/test_writesTakingTurnsWithItsParent_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])
        writes.wait()
        let elapsed = ContinuousClock.now - start

        XCTAssertNil(turns.withLock { $0.missed })
        XCTAssertEqual(turns.withLock { $0.taken }, Self.turns)
        let last = "c\(Self.turns - 1)"
        XCTAssertEqual(childShows, last, "the child shows its last write")
        XCTAssertTrue(eventually { shown.withLock { $0.last } == last }, "this process shows it too")
        XCTAssertEqual(levelValue("k", in: app.shared), last, "and the shared level holds it")
        print("\(Self.turns * 2) writes taking turns between two processes in \(elapsed)")
    }

    /// How many turns each process takes (LOADING_TEST_SCALE scales it).
    private static let turns = scaled(500, floor: 20)

    func test_writesTakingTurnsWithItsParent_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let folder = URL(fileURLWithPath: path)
        let child = try makeProcess(in: folder, polling: .milliseconds(5))
        let shown = observe("k", in: child.store)
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("child-ready").path, contents: nil)
        for turn in 0..<Self.turns {
            guard eventually({ shown.withLock { $0.last } == "p\(turn)" }) else {
                sayKillNow("never showed p\(turn)")
                waitToBeKilled()
                return
            }
            child.store.write("c\(turn)", for: "k")
        }
        flush(child.store)
        sayKillNow(shown.withLock { $0.last ?? nil } ?? "nothing")
        waitToBeKilled()
    }

    /// A child writing one key over and over is killed: the shared level holds one whole value it wrote, which this
    /// process's store shows, and the journal reads on.
    func test_aProcessKilledWhileWriting_leavesAWholeValue() throws {
        let said = try runChildUntilKilled(
            "ExternalChangesTests/test_writesUntilKilled_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])
        let written = try XCTUnwrap(said.flatMap { Int($0) })

        let app = try makeProcess()
        let read = expectation(description: "read")
        let value = Locked<String?>(nil)
        app.store.read("k", policy: .cacheOnly).load { result in
            value.withLock { $0 = try? result.get().value }
            read.fulfill()
        }
        wait(for: [read], timeout: .watchdog)
        let shown = try XCTUnwrap(value.withLock { $0 }, "a value survived")
        let index = try XCTUnwrap(Int(shown.prefix { $0 != ":" }), "a value the child wrote: \(shown.prefix(40))")
        XCTAssertGreaterThanOrEqual(index, written - 1)
        XCTAssertEqual(shown, Self.bulky(index), "whole, not a mix of two writes")
        XCTAssertNotNil(try ChangeJournal(file: directory.appendingPathComponent("changes.journal")).readChanges())
    }

    /// A value of about 64 KB made from `index`, so that a mix of two is seen.
    private static func bulky(_ index: Int) -> String {
        "\(index):" + String(repeating: String(index % 10), count: 64 * 1024)
    }

    func test_writesUntilKilled_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let child = try makeProcess(in: URL(fileURLWithPath: path))
        var index = 0
        while true {
            child.store.write(Self.bulky(index), for: "k")
            flush(child.store)
            index += 1
            if index == 20 { sayKillNow("\(index)") }
        }
    }
}
