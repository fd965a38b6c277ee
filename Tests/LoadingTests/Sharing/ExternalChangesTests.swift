import Foundation
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
                    return AnyCancellationToken()
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

    /// What `store` shows for `key`, with when the observer saw it (seconds since 1970, the clock both processes
    /// read).
    private func observeTimed(_ key: String, in store: Store<String, String>) -> Locked<[(String?, Double)]> {
        let shown = Locked<[(String?, Double)]>([])
        let subscription = store.changes(for: key).sink { response in
            let now = Date().timeIntervalSince1970
            shown.withLock { $0.append((response.value, now)) }
        }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return shown
    }

    private func flush(_ store: Store<String, String>) {
        let flushed = expectation(description: "flushed")
        store.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: 5)
    }

    func test_aWriteInOneProcess_reachesTheOthersObserver_withinHalfASecond_andIsNotWrittenBack() throws {
        let records = try journalReader()
        let app = try makeProcess()
        let widget = try makeProcess()
        let shown = observe("u1", in: widget.store)

        let started = ContinuousClock.now
        app.store.write("Ada", for: "u1")
        XCTAssertTrue(eventually(timeout: .seconds(2)) { shown.withLock { $0.last } == "Ada" })
        let elapsed = ContinuousClock.now - started
        print("A write reached the other store's observer in \(elapsed)")
        XCTAssertLessThan(elapsed, .milliseconds(500))

        XCTAssertEqual(widget.memory.cachedValue(for: "u1").map(\.value), .success("Ada"), "kept in its faster level")
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
                return AnyCancellationToken()
            }, completion: { _ in refused.fulfill() })
        wait(for: [refused], timeout: 5)

        let accepted = expectation(description: "accepted")
        app.store.mutate(
            "u1", { _ in "Ada, renamed" },
            commit: AnyLoader<Void> { completion in
                completion(.success(()))
                return AnyCancellationToken()
            }, completion: { _ in accepted.fulfill() })
        wait(for: [accepted], timeout: 5)

        XCTAssertTrue(eventually(timeout: .seconds(2)) { shown.withLock { $0.last } == "Ada, renamed" })
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

        XCTAssertTrue(eventually(timeout: .seconds(2)) { shown.withLock { $0.last } == .some(nil) })
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
        wait(for: [cleared], timeout: 5)
        app.store.write("Bea", for: "u3")  // the next user
        flush(app.store)

        XCTAssertTrue(
            eventually(timeout: .seconds(2)) {
                first.withLock { $0.last } == .some(nil) && second.withLock { $0.last } == .some(nil)
                    && third.withLock { $0.last } == "Bea"
            })
        let kept = expectation(description: "read from the shared level")
        app.shared.value(for: "u3") { result in
            XCTAssertEqual(try? result.get().value, "Bea", "the widget's clear did not empty the shared level")
            kept.fulfill()
        }
        wait(for: [kept], timeout: 5)
    }

    // MARK: Two real processes

    private static let variable = "LOADING_SHARING_CHILD"

    /// The child process (standing for a widget's app) writes a key, has a change of it confirmed, and then clears
    /// its store; this process's observer sees all three, each within half a second of the child's change.
    func test_aWriteAConfirmedChangeAndAClearInAnotherProcess_reachThisProcesssObserver() throws {
        let app = try makeProcess()
        let shown = observeTimed("u1", in: app.store)

        let said = try runChildUntilKilled(
            "ExternalChangesTests/test_writesConfirmsThenClears_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])
        let times = try XCTUnwrap(said?.split(separator: " ").compactMap { Double($0) }, "the child said when")
        XCTAssertEqual(times.count, 3)

        XCTAssertTrue(eventually(timeout: .seconds(2)) { shown.withLock { $0.last?.0 } == .some(nil) })
        let seen = shown.withLock { $0 }
        let written = try XCTUnwrap(seen.first { $0.0 == "from the child" }, "the write was shown")
        let confirmed = try XCTUnwrap(seen.first { $0.0 == "confirmed in the child" }, "the change was shown")
        let cleared = try XCTUnwrap(seen.last { $0.0 == nil && $0.1 >= confirmed.1 }, "the clear was shown")
        let delays = [written.1 - times[0], confirmed.1 - times[1], cleared.1 - times[2]]
        print(
            "Between two processes: a write seen after \(Int(delays[0] * 1000)) ms, a confirmed change after "
                + "\(Int(delays[1] * 1000)) ms, a clear after \(Int(delays[2] * 1000)) ms")
        for delay in delays { XCTAssertLessThan(delay, 0.5) }
        // The server held the change for 300 ms: it was shown in the child then, not shared.
        XCTAssertGreaterThan(confirmed.1, times[1] - 0.2, "a change is shared once confirmed, not while pending")
    }

    func test_writesConfirmsThenClears_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let child = try makeProcess(in: URL(fileURLWithPath: path))
        child.store.write("from the child", for: "u1")
        flush(child.store)
        let written = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 0.6)
        // Shown here at once, held for 300 ms by the server, then confirmed.
        let server = DispatchQueue(label: "server")
        let accepted = expectation(description: "accepted")
        child.store.mutate(
            "u1", { _ in "confirmed in the child" },
            commit: AnyLoader<Void> { completion in
                server.asyncAfter(deadline: .now() + 0.3) { completion(.success(())) }
                return AnyCancellationToken()
            }, completion: { _ in accepted.fulfill() })
        wait(for: [accepted], timeout: 5)
        let confirmed = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 0.6)
        let cleared = expectation(description: "cleared")
        child.store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: 5)
        let clearedAt = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 0.6)
        sayKillNow("\(written) \(confirmed) \(clearedAt)")
        Thread.sleep(forTimeInterval: 30)
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

    /// Waits until `shown` ends with what the shared level holds and stays so for a moment; returns that value.
    private func settledValue(
        _ key: String, shown: Locked<[String?]>, shared: DiskCache<String, String>
    ) -> String?? {
        var agreedSince: ContinuousClock.Instant?
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let level = levelValue(key, in: shared)
            if shown.withLock({ $0.last }) == .some(level) {
                if let since = agreedSince, ContinuousClock.now - since > .milliseconds(300) { return .some(level) }
                agreedSince = agreedSince ?? ContinuousClock.now
            } else {
                agreedSince = nil
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return nil
    }

    /// This process and a child write one key 500 times each, at the same time: both end showing the value the
    /// shared level holds, the same one.
    func test_writesFromTwoProcessesAtOnce_endWithBothShowingWhatTheLevelHolds() throws {
        let app = try makeProcess()
        let shown = observe("k", in: app.store)
        let writes = DispatchGroup()
        DispatchQueue.global().async(group: writes) { [directory] in
            for index in 0..<500 { app.store.write("p\(index)", for: "k") }
            let flushed = DispatchSemaphore(value: 0)
            app.store.flush { flushed.signal() }
            flushed.wait()
            _ = FileManager.default.createFile(
                atPath: directory!.appendingPathComponent("parent-done").path, contents: nil)
        }

        let childShows = try runChildUntilKilled(
            "ExternalChangesTests/test_writesAtOnceWithItsParent_whenStartedByTheSharingTests",
            environment: [Self.variable: directory.path])
        writes.wait()

        let settled = try XCTUnwrap(settledValue("k", shown: shown, shared: app.shared), "this process settled")
        XCTAssertNotNil(settled)
        XCTAssertEqual(settled, childShows, "both show the value the level holds")
    }

    func test_writesAtOnceWithItsParent_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let folder = URL(fileURLWithPath: path)
        let child = try makeProcess(in: folder)
        let shown = observe("k", in: child.store)
        for index in 0..<500 { child.store.write("c\(index)", for: "k") }
        flush(child.store)
        let parentDone = folder.appendingPathComponent("parent-done").path
        XCTAssertTrue(eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: parentDone) })
        let settled = try XCTUnwrap(settledValue("k", shown: shown, shared: child.shared), "the child settled")
        sayKillNow(settled ?? "nothing")
        Thread.sleep(forTimeInterval: 30)
    }

    /// Waits, polling, until `condition` holds (off the main thread as well as on it); whether it did.
    private static func holds(within seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.001)
        }
        return true
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
            guard Self.holds(within: 30, { FileManager.default.fileExists(atPath: ready) }) else {
                return turns.withLock { $0.missed = "the child never started" }
            }
            for turn in 0..<Self.turns {
                if turn > 0, !Self.holds(within: 10, { shown.withLock { $0.last } == "c\(turn - 1)" }) {
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
        XCTAssertTrue(Self.holds(within: 5) { shown.withLock { $0.last } == last }, "this process shows it too")
        XCTAssertEqual(levelValue("k", in: app.shared), last, "and the shared level holds it")
        print("\(Self.turns * 2) writes taking turns between two processes in \(elapsed)")
    }

    private static let turns = 500

    func test_writesTakingTurnsWithItsParent_whenStartedByTheSharingTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ExternalChangesTests: it runs only when that test starts it")
        }
        let folder = URL(fileURLWithPath: path)
        let child = try makeProcess(in: folder, polling: .milliseconds(5))
        let shown = observe("k", in: child.store)
        XCTAssertTrue(Self.holds(within: 5) { !shown.withLock { $0.isEmpty } }, "the first read ended")
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("child-ready").path, contents: nil)
        for turn in 0..<Self.turns {
            guard Self.holds(within: 10, { shown.withLock { $0.last } == "p\(turn)" }) else {
                sayKillNow("never showed p\(turn)")
                Thread.sleep(forTimeInterval: 30)
                return
            }
            child.store.write("c\(turn)", for: "k")
        }
        flush(child.store)
        sayKillNow(shown.withLock { $0.last ?? nil } ?? "nothing")
        Thread.sleep(forTimeInterval: 30)
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
        wait(for: [read], timeout: 5)
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
