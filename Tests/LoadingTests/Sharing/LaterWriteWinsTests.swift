import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Two stores standing for two processes over one disk folder, each with its own disk queue and its own journal over
/// one file: whichever save lands last, the change made last wins, in both stores and in the shared level.
final class LaterWriteWinsTests: XCTestCase {
    private var directory: URL!
    private var subscriptions: [any CancellationToken] = []

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("later-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        for subscription in subscriptions { subscription.cancel() }
        // A store of the test may still save again as its folder goes: that is not the test's failure.
        hasEnded.withLock { $0 = true }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether the test's body ended (its folder is being removed).
    private let hasEnded = Locked(false)

    /// A process's side: its store, what its observer of "k" saw, and the shared level as it sees it.
    private struct Process {
        let store: Store<String, String>
        let shown: Locked<[String?]>
        let shared: DiskCache<String, String>
    }

    /// `blocking`: the first save to the process's memory level blocks its thread until released.
    private func makeProcess(
        in folder: String = "", holding held: HeldSaves? = nil, blocking: BlockingSaves? = nil
    ) throws -> Process {
        try makeProcess(at: directory.appendingPathComponent(folder), holding: held, blocking: blocking)
    }

    private func makeProcess(
        at directory: URL, holding held: HeldSaves? = nil, blocking: BlockingSaves? = nil
    ) throws -> Process {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let shared = DiskCache<String, String>(directory: directory.appendingPathComponent("shared"))
        let level: StoreLevel<String, String> =
            if let held { .cache(HoldingCache(base: shared, held: held), name: "shared") } else {
                .cache(shared, name: "shared")
            }
        let memory: StoreLevel<String, String> =
            if let blocking { .cache(BlockingCache(base: MemoryCache(), blocking: blocking), name: "memory") } else {
                .cache(MemoryCache<String, String>(), name: "memory")
            }
        let store = Store(
            levels: [memory, level],
            fetch: LoaderFamily { (_: String) in
                AnyLoader<String> { completion in
                    completion(.failure(URLError(.notConnectedToInternet)))
                    return AnyCancellationToken {}
                }
            },
            sharing: try .journal(
                at: directory.appendingPathComponent("changes.journal"), sharedLevel: "shared",
                polling: .milliseconds(5)),
            onWriteFailure: { [hasEnded] error in
                if !hasEnded.withLock({ $0 }) { XCTFail("a level write failed: \(error)") }
            })
        let shown = Locked<[String?]>([])
        let subscription = store.changes(for: "k").sink { response in shown.withLock { $0.append(response.value) } }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return Process(store: store, shown: shown, shared: shared)
    }

    /// The earlier write's save is held until the later one (made in the other store) landed and was learned: both
    /// stores end showing the later one, and the shared level holds it.
    func test_anEarlierWriteWhoseSaveLandsLast_losesToTheLaterOne() throws {
        let held = HeldSaves()
        let widget = try makeProcess(holding: held)
        let app = try makeProcess()

        widget.store.write("earlier", for: "k")
        XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")
        app.store.write("later", for: "k")
        flush(app.store)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == "later" }, "the widget learned the later write")
        held.release()
        flush(widget.store)

        assertBothShow("later", app: app, widget: widget, "the later write wins")
    }

    /// A flush ends once the write is in the journal too: a process ended then has told the others.
    func test_aFlush_endsOnceTheOtherProcessesCanLearnTheWrite() throws {
        let held = HeldSaves()
        let widget = try makeProcess(holding: held)
        let records = try ChangeJournal(file: directory.appendingPathComponent("changes.journal"))
        widget.store.write("flushed", for: "k")
        XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")

        let recordedWhenFlushed = Locked<[ChangeJournal.Change]>([])
        let flushed = expectation(description: "flushed")
        widget.store.flush {
            recordedWhenFlushed.withLock { $0 = records.readChanges() }
            flushed.fulfill()
        }
        held.release()
        wait(for: [flushed], timeout: .watchdog)

        XCTAssertEqual(recordedWhenFlushed.withLock { $0 }, [.saved(Data(#"["k"]"#.utf8))])
    }

    /// The same, for a removal made last: the earlier write landing after it does not bring the value back.
    func test_anEarlierWriteWhoseSaveLandsLast_losesToALaterRemoval() throws {
        let held = HeldSaves()
        let widget = try makeProcess(holding: held)
        let app = try makeProcess()

        widget.store.write("earlier", for: "k")
        XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")
        app.store.remove("k")
        flush(app.store)
        held.release()
        flush(widget.store)

        assertBothShow(nil, app: app, widget: widget, "the removal wins")
    }

    /// A write made while another caller issues the key's level operations returns before its own save is issued
    /// (here the other caller is blocked in the faster level). A removal made after the write returned, in another
    /// process, is the later change all the same: it wins, though the write's save reaches the shared level last.
    func test_aWriteWhoseSaveAnotherCallerIssuesLate_losesToARemovalMadeAfterIt() throws {
        let blocking = BlockingSaves()
        let app = try makeProcess(blocking: blocking)
        let widget = try makeProcess()

        DispatchQueue.global().async { app.store.write("first", for: "k") }
        XCTAssertEqual(blocking.entered.wait(timeout: .now() + .watchdog), .success, "the first write's save blocks")
        app.store.write("second", for: "k")  // its save waits behind the first's, issued by the blocked thread
        widget.store.remove("k")
        flush(widget.store)
        blocking.release()
        flush(app.store)

        assertBothShow(nil, app: app, widget: widget, "the removal, made last, wins")
    }

    /// A write made after a clear in another process, whose save landed before that clear emptied the level: the
    /// write outlives the clear, in the level and in both stores.
    func test_aWriteMadeAfterAClearElsewhere_outlivesIt_whicheverLandsLast() throws {
        let held = HeldSaves()
        let app = try makeProcess(holding: held)
        let widget = try makeProcess()

        let cleared = expectation(description: "cleared")
        app.store.clear { cleared.fulfill() }
        XCTAssertTrue(eventually { held.count == 1 }, "the app's emptying of the shared level is held")
        widget.store.write("new", for: "k")
        flush(widget.store)
        held.release()
        wait(for: [cleared], timeout: .watchdog)

        assertBothShow("new", app: app, widget: widget, "the write outlives the clear")
    }

    /// A write made after a logout in another process, whose save waits behind an earlier save of the key (another
    /// caller is issuing it, blocked in the faster level) when the logout is learned: the write is the next user's,
    /// and outlives the logout, in the level and in both stores.
    func test_aWriteQueuedWhenALogoutElsewhereIsLearned_outlivesIt() throws {
        let blocking = BlockingSaves()
        let widget = try makeProcess(blocking: blocking)
        let app = try makeProcess()

        DispatchQueue.global().async { widget.store.write("first", for: "k") }
        XCTAssertEqual(blocking.entered.wait(timeout: .now() + .watchdog), .success, "the first write's save blocks")
        logOut(app.store)
        widget.store.write("after the logout", for: "k")  // its save waits behind the blocked one
        widget.store.learnOtherProcessesChanges()
        blocking.release()
        flush(widget.store)
        app.store.learnOtherProcessesChanges()

        assertBothShow("after the logout", app: app, widget: widget, "the write made after the logout outlives it")
    }

    /// A write made before a logout in another process, whose save lands after the logout emptied the level: it is
    /// the old user's, and gone, from the level and from both stores (the processes learn it in either order).
    func test_aWriteMadeBeforeALogoutElsewhere_isGone_thoughItsSaveLandsAfter() throws {
        for widgetLearnsTheLogoutFirst in [false, true] {
            let held = HeldSaves()
            let widget = try makeProcess(in: "logout-\(widgetLearnsTheLogoutFirst)", holding: held)
            let app = try makeProcess(in: "logout-\(widgetLearnsTheLogoutFirst)")

            widget.store.write("old user's", for: "k")
            XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")
            logOut(app.store)
            if widgetLearnsTheLogoutFirst {
                XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == .some(nil) }, "the widget logged out")
            }
            held.release()
            flush(widget.store)

            assertBothShow(nil, app: app, widget: widget, "the logout, made last, wins")
        }
    }

    /// Two changes of a key made before a logout in another process, both saved after the logout emptied the level:
    /// the process that logged out learns them at once, removes the value from the level again, and shows nothing.
    func test_twoChangesMadeBeforeALogoutElsewhere_learnedAtOnce_areGone() throws {
        let held = HeldSaves()
        let widget = try makeProcess(holding: held)
        let app = try makeProcess()

        widget.store.remove("k")
        widget.store.write("old user's", for: "k")
        XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")
        logOut(app.store)
        held.release()
        flush(widget.store)
        app.store.learnOtherProcessesChanges()  // the removal and the write, at once
        widget.store.learnOtherProcessesChanges()

        assertBothShow(nil, app: app, widget: widget, "the logout, made last, wins")
    }

    /// A process that fell behind the journal (its records lost to rotations) while the other's earlier write landed
    /// after its own later one: it saves its own again rather than showing what the level holds, and both end on it.
    func test_aProcessThatMissedRecords_keepsItsLaterWrite() throws {
        let shared = MemoryCache<String, String>()
        let held = HeldSaves()
        let file = directory.appendingPathComponent("changes.journal")
        func process(_ level: some KeyedCache<String, String>, polling: Duration) throws -> Process {
            let sharing = ProcessSharing<String>(
                journal: try ChangeJournal(file: file, maxBytes: 4096), sharedLevel: "shared",
                encodeKey: { Data($0.utf8) }, decodeKey: { String(decoding: $0, as: UTF8.self) }, polling: polling)
            let store = Store(
                levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(level, name: "shared")],
                fetch: LoaderFamily { (_: String) in
                    AnyLoader<String> { completion in
                        completion(.failure(URLError(.notConnectedToInternet)))
                        return AnyCancellationToken {}
                    }
                },
                sharing: sharing,
                onWriteFailure: { [hasEnded] error in
                    if !hasEnded.withLock({ $0 }) { XCTFail("a level write failed: \(error)") }
                })
            let shown = Locked<[String?]>([])
            let subscription = store.changes(for: "k").sink { response in shown.withLock { $0.append(response.value) } }
            subscriptions.append(AnyCancellationToken { subscription.cancel() })
            return Process(store: store, shown: shown, shared: DiskCache(directory: directory))
        }
        // The app reads the journal only when told to here.
        let app = try process(shared, polling: .seconds(3_600))
        let widget = try process(HoldingCache(base: shared, held: held), polling: .milliseconds(5))

        widget.store.write("earlier", for: "k")
        XCTAssertTrue(eventually { held.count == 1 }, "the widget's save is held")
        app.store.write("later", for: "k")
        flush(app.store)
        XCTAssertTrue(eventually { widget.shown.withLock { $0.last } == "later" }, "the widget learned the later write")
        // The journal starts a new file (the app's reader stays on the first), where the earlier write is recorded;
        // then two more: the app's reader loses the one between.
        for index in 0..<100 { app.store.write("x", for: "before\(index)") }
        flush(app.store)
        held.release()
        flush(widget.store)
        for index in 0..<200 { widget.store.write("x", for: "after\(index)") }
        flush(widget.store)
        app.store.learnOtherProcessesChanges()

        let level = { () -> String? in
            let read = Locked<String?>(nil)
            let done = DispatchSemaphore(value: 0)
            shared.value(for: "k") { result in
                read.withLock { $0 = try? result.get().value }
                done.signal()
            }
            done.wait()
            return read.withLock { $0 }
        }
        XCTAssertTrue(
            eventually {
                level() == "later" && app.shown.withLock { $0.last } == "later"
                    && widget.shown.withLock { $0.last } == "later"
            },
            "the later write wins: level \(String(describing: level())), app \(app.shown.withLock { $0 }), widget "
                + "\(widget.shown.withLock { $0 })")
    }

    /// A clear learned from another process waits for this store's level operations under way; the next user's
    /// write, learned meanwhile, is shown once the clear ended (a read during the clear finds nothing).
    func test_theNextUsersWrite_learnedWhileAClearElsewhereIsBeingMade_isShown() throws {
        let app = try makeProcess()
        app.store.write("Ada", for: "u1")
        flush(app.store)
        let blocking = BlockingSaves()
        let widgetStore = Store(
            levels: [
                .cache(BlockingCache(base: MemoryCache(), blocking: blocking), name: "memory"),
                .cache(
                    DiskCache<String, String>(directory: directory.appendingPathComponent("shared")), name: "shared"),
            ],
            fetch: LoaderFamily { (_: String) in
                AnyLoader<String> { completion in
                    completion(.failure(URLError(.notConnectedToInternet)))
                    return AnyCancellationToken {}
                }
            },
            sharing: try .journal(
                at: directory.appendingPathComponent("changes.journal"), sharedLevel: "shared", polling: .seconds(3_600)
            ))
        let shown = Locked<[String?]>([])
        let subscription = widgetStore.changes(for: "k").sink { response in shown.withLock { $0.append(response.value) }
        }
        defer { subscription.cancel() }

        let journal = try ChangeJournal(file: directory.appendingPathComponent("changes.journal"))
        // The widget's read of u1 saves the hit to its memory level, and that save blocks its thread.
        widgetStore.read("u1").load { _ in }.cancelAfterTest(self)
        XCTAssertEqual(blocking.entered.wait(timeout: .now() + .watchdog), .success, "the save blocks")
        logOut(app.store)
        app.store.write("Bea", for: "k")  // the next user
        flush(app.store)
        var recorded: [ChangeJournal.Change] = []
        XCTAssertTrue(
            eventually {
                recorded += journal.readChanges()
                return recorded.contains(.saved(Data("[\"k\"]".utf8)))
            }, "the write is recorded: \(recorded)")
        widgetStore.learnOtherProcessesChanges()  // the clear waits for the save; "k" is learned meanwhile
        blocking.release()

        XCTAssertTrue(eventually { shown.withLock { $0.last } == "Bea" }, "shown: \(shown.withLock { $0 })")
    }

    /// A process remembers its latest change of a bounded number of keys, however many it saves.
    func test_theChangesRemembered_stayBounded_asKeysGrow() throws {
        let (level, order) = StoreLevel.cache(MemoryCache<String, String>(), name: "shared").journaling(
            to: try ChangeJournal(file: directory.appendingPathComponent("changes.journal")),
            encodeKey: { Data($0.utf8) }, onFailure: { XCTFail("\($0)") })
        let saves = 3 * SharedLevelOrder.claimLimit
        let saved = DispatchGroup()
        for index in 0..<saves {
            saved.enter()
            level.boxed.save(ValueBox("v"), 0, StoreKey("k\(index)")) { _ in saved.leave() }
        }
        XCTAssertEqual(saved.wait(timeout: .now() + .watchdog), .success)
        XCTAssertLessThanOrEqual(order.claimCount, 2 * SharedLevelOrder.claimLimit)
        XCTAssertGreaterThanOrEqual(order.claimCount, SharedLevelOrder.claimLimit)
    }

    /// Two stores write one key in turn, each write made once the other's returned (not once it landed), their disk
    /// queues landing in whatever order: every round ends with both showing the last write, which the level holds.
    func test_writesMadeInTurn_endOnTheLast_everyRound() throws {
        for round in 0..<scaled(20, floor: 4) {
            let first = try makeProcess(in: "round-\(round)")
            let second = try makeProcess(in: "round-\(round)")
            let writes = scaled(1_000, floor: 100)
            for index in 0..<writes {
                (index.isMultiple(of: 2) ? first : second).store.write("w\(index)", for: "k")
            }
            flush(first.store)
            flush(second.store)
            let last = "w\(writes - 1)"
            XCTAssertTrue(
                eventually {
                    level("k", in: first.shared) == last && first.shown.withLock { $0.last } == last
                        && second.shown.withLock { $0.last } == last
                },
                "round \(round): level \(String(describing: level("k", in: first.shared))), first "
                    + "\(String(describing: first.shown.withLock { $0.last })), second "
                    + "\(String(describing: second.shown.withLock { $0.last }))")
        }
    }

    /// This process and a child take turns writing one key, 1,000 writes a round: each writes once the other's write
    /// returned (a file says so), not once it landed. Every round ends with both showing the last write (the
    /// child's), which the shared level holds.
    func test_writesMadeInTurnByTwoProcesses_endOnTheLast_everyRound() throws {
        let child = try startChild(
            "LaterWriteWinsTests/test_writesInTurnWithItsParent_whenStartedByTheOrderTests",
            environment: [Self.variable: directory.path])
        var ends: [String] = []
        for round in 0..<Self.rounds {
            let folder = directory.appendingPathComponent("round-\(round)")
            let app = try makeProcess(at: folder)
            XCTAssertTrue(eventually { Self.hasTurn("ready", in: folder) }, "the child started round \(round)")
            for index in stride(from: 0, to: Self.writes, by: 2) {
                if index > 0 {
                    XCTAssertTrue(eventually { Self.hasTurn("\(index - 1)", in: folder) }, "the child wrote")
                }
                app.store.write("w\(index)", for: "k")
                Self.endTurn("\(index)", in: folder)
            }
            flush(app.store)
            let last = "w\(Self.writes - 1)"
            XCTAssertTrue(
                eventually { level("k", in: app.shared) == last && app.shown.withLock { $0.last } == last },
                "round \(round): level \(String(describing: level("k", in: app.shared))), here "
                    + "\(String(describing: app.shown.withLock { $0.last }))")
            ends.append(child.waitForLine(startingWith: "round \(round): ") ?? "nothing")
        }
        child.kill()
        XCTAssertEqual(ends, Array(repeating: "w\(Self.writes - 1)", count: Self.rounds), "what the child ended on")
    }

    private static let variable = "LOADING_ORDER_CHILD"
    private static let rounds = scaled(3, floor: 1)
    private static let writes = scaled(1_000, floor: 100)

    private static func hasTurn(_ name: String, in folder: URL) -> Bool {
        FileManager.default.fileExists(atPath: folder.appendingPathComponent("turn-\(name)").path)
    }

    private static func endTurn(_ name: String, in folder: URL) {
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("turn-\(name)").path, contents: nil)
    }

    func test_writesInTurnWithItsParent_whenStartedByTheOrderTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of LaterWriteWinsTests: it runs only when that test starts it")
        }
        for round in 0..<Self.rounds {
            let folder = URL(fileURLWithPath: path).appendingPathComponent("round-\(round)")
            let child = try makeProcess(at: folder)
            Self.endTurn("ready", in: folder)
            for index in stride(from: 1, to: Self.writes, by: 2) {
                XCTAssertTrue(eventually { Self.hasTurn("\(index - 1)", in: folder) }, "the parent wrote")
                child.store.write("w\(index)", for: "k")
                Self.endTurn("\(index)", in: folder)
            }
            flush(child.store)
            let last = "w\(Self.writes - 1)"
            _ = eventually { level("k", in: child.shared) == last && child.shown.withLock { $0.last } == last }
            ChildTest.say("round \(round): \(child.shown.withLock { $0.last ?? nil } ?? "nothing")")
        }
        waitToBeKilled()
    }

    /// Waits until the shared level holds `value` (`nil`: nothing) for "k" and both stores show it.
    private func assertBothShow(
        _ value: String?, app: Process, widget: Process, _ what: String, line: UInt = #line
    ) {
        XCTAssertTrue(
            eventually {
                level("k", in: app.shared) == value && app.shown.withLock { $0.last } == .some(value)
                    && widget.shown.withLock { $0.last } == .some(value)
            },
            "\(what): level \(String(describing: level("k", in: app.shared))), app \(app.shown.withLock { $0 }), "
                + "widget \(widget.shown.withLock { $0 })", line: line)
    }

    /// Clears `store` (a logout) and waits until its levels are emptied.
    private func logOut(_ store: Store<String, String>) {
        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
    }

    private func flush(_ store: Store<String, String>) {
        let flushed = expectation(description: "flushed")
        store.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)
    }

    private func level(_ key: String, in shared: DiskCache<String, String>) -> String? {
        let read = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        shared.value(for: key) { result in
            read.withLock { $0 = try? result.get().value }
            done.signal()
        }
        done.wait()
        return read.withLock { $0 }
    }
}

/// Saves held by a ``HoldingCache`` until released.
private final class HeldSaves: Sendable {
    private let saves = Locked<[@Sendable () -> Void]>([])
    private let isHolding = Locked(true)

    var count: Int { saves.withLock { $0.count } }

    /// Runs `save` now, or once released while holding.
    func hold(_ save: @escaping @Sendable () -> Void) {
        let held = isHolding.withLock { holding in
            guard holding else { return false }
            saves.withLock { $0.append(save) }
            return true
        }
        if !held { save() }
    }

    /// Lets the held saves go, in order, and every later one straight through.
    func release() {
        isHolding.withLock { $0 = false }
        for save in saves.withLock({ exchange(&$0, with: []) }) { save() }
    }
}

/// A cache whose saves and emptying wait for ``HeldSaves/release()``; reads and removals go straight through.
private struct HoldingCache: KeyedCache {
    let base: any KeyedCache<String, String>
    let held: HeldSaves

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        base.value(for: key, completion: completion)
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        held.hold { [base] in base.save(value, for: key, completion: completion) }
    }

    func save(
        _ value: String, for key: String, savedAt: Date,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        held.hold { [base] in base.save(value, for: key, savedAt: savedAt, completion: completion) }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeValue(for: key, completion: completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        held.hold { [base] in base.removeAll(completion: completion) }
    }
}

/// Blocks the first save's thread until released.
private final class BlockingSaves: Sendable {
    let entered = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    private let isFirst = Locked(true)

    func block() {
        guard isFirst.withLock({ exchange(&$0, with: false) }) else { return }
        entered.signal()
        _ = gate.wait(timeout: .now() + .watchdog)
    }

    func release() {
        gate.signal()
    }
}

/// A cache whose first save blocks its caller's thread until ``BlockingSaves/release()``.
private struct BlockingCache: KeyedCache {
    let base: MemoryCache<String, String>
    let blocking: BlockingSaves

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        base.value(for: key, completion: completion)
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        blocking.block()
        base.save(value, for: key, completion: completion)
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeValue(for: key, completion: completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeAll(completion: completion)
    }
}

extension CancellationToken {
    /// Keeps the load going until the test ends.
    fileprivate func cancelAfterTest(_ test: XCTestCase) {
        test.addTeardownBlock { self.cancel() }
    }
}
