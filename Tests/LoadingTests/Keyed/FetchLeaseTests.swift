import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Stores standing for the instances of a service, sharing a level and a fetch lease: a key missing everywhere is
/// fetched once across them, and a lease never fails a read.
final class FetchLeaseTests: XCTestCase {
    func test_aThousandCallersOverTwoInstances_makeOneUpstreamCallForAColdKey() {
        let shared = MemoryCache<String, String>()
        let lease = MemoryLease()
        let upstream = SlowUpstream(answers: .whenOpened)
        // Waiting for the holder longer than the watchdog: a second upstream call could only be a defect.
        let instances = (0..<2).map { _ in
            Store(
                levels: [
                    .cache(MemoryCache<String, String>(), name: "memory"), .cache(shared, name: "shared"),
                ],
                fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
                coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))
        }

        let answers = Locked<[String]>([])
        let answered = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 1_000) { index in
            answered.enter()
            instances[index % 2].read("ACME").load { result in
                answers.withLock { $0.append((try? result.get().value) ?? "failed") }
                answered.leave()
            }
        }
        upstream.open()  // every caller asked before the upstream answers

        XCTAssertEqual(answered.wait(timeout: .now() + .watchdog), .success)
        XCTAssertEqual(upstream.calls, 1, "one upstream call across both instances")
        XCTAssertEqual(Set(answers.withLock { $0 }), ["quote ACME 1"])
        XCTAssertEqual(answers.withLock { $0.count }, 1_000)
    }

    func test_whenTheHoldersFetchFails_theOtherFetchesItselfAfterItsWait() {
        let shared = MemoryCache<String, String>()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease, and its fetch will bring nothing")
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .milliseconds(200), polling: .milliseconds(5)))

        let started = ContinuousClock.now
        let value = awaitResponse(store.read("ACME"))?.value

        XCTAssertEqual(value, "quote ACME 1")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(200), "it waited for the holder")
        XCTAssertEqual(upstream.calls, 1)
    }

    func test_aLeaseThatCannotBeReached_neverFailsARead() {
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(UnreachableLease(), sharedLevel: "shared"))

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1")
    }

    func test_aLeaseThatStopsAnswering_holdsAMissNoLongerThanItsTimeout_andALeaseTakenLateIsGivenBack() {
        let lease = SilentLease()
        let shared = SharedTable()
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", timeout: .milliseconds(50)))

        // Unbounded, the read would wait for the lease for ever: its database stopped answering.
        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1", "fetched without the lease")
        XCTAssertEqual(upstream.calls, 1)
        // The shared level may be in the database that stopped: read again, it would cost the miss another timeout.
        XCTAssertEqual(shared.reads, 1, "the read's own look at the shared level, and no other")
        XCTAssertTrue(eventually { lease.releases == 1 }, "what the fetch would hold is given back once saved")

        lease.answerEveryAcquire()  // the database answers after all: the lease was taken
        XCTAssertTrue(eventually { lease.releases == 2 }, "a lease taken after its call was given up is given back")
    }

    func test_aWaiter_asksForTheLeaseAgainAtEachLook_andFetchesOnceItsHolderLetsItLapse() {
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease, and dies holding it")
        let upstream = SlowUpstream()
        // Waiting for the holder longer than the watchdog: only asking again can end the wait in time.
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))
        let answer = LoadRecorder<StoreResponse<String>>()
        _ = answer.load(store.read("ACME"))
        XCTAssertTrue(eventually { lease.acquires >= 2 }, "the waiter asked again")
        XCTAssertEqual(upstream.calls, 0, "it waits while the lease is held")

        lease.lapse("ACME")

        XCTAssertTrue(eventually { answer.values.first?.value == "quote ACME 1" }, "taken, then fetched")
        XCTAssertEqual(upstream.calls, 1)
        XCTAssertTrue(eventually { lease.log.last == "released ACME after 0 saves" }, "and given back")
    }

    func test_aLeaseCall_isBoundedByTheSharedLevelsTimeout_whenTheLevelsReadFailed() {
        let lease = SilentLease()
        let upstream = SlowUpstream()
        // Waiting past the watchdog: a call given `waiting` rather than the level's timeout could only time out.
        let store = Store(
            levels: [.cache(UnreadableTable(), name: "shared", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2))

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1")
        lease.answerEveryAcquire()
    }

    func test_aSlowLeaseCall_afterTheSharedLevelAnsweredTheRead_isWaitedFor_notCountedUnreachable() {
        let lease = SilentLease()
        let upstream = SlowUpstream()
        let outcomes = Locked<[CoordinationOutcome]>([])
        let store = Store(
            levels: [.cache(SharedTable(), name: "shared", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2),
            events: { event in
                if case .fetchCoordinated(_, _, let outcome, _) = event { outcomes.withLock { $0.append(outcome) } }
            })
        let answer = LoadRecorder<StoreResponse<String>>()
        _ = answer.load(store.read("ACME"))
        XCTAssertTrue(eventually { lease.pendingAcquires == 1 })
        // Proof of absence: a call given the level's 50 ms would have counted as unreachable, and fetched, by now.
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertEqual(upstream.calls, 0, "the store waits for the lease: its database answered the read")

        lease.answerEveryAcquire()  // a busy machine's answer, late

        XCTAssertTrue(eventually { answer.values.first?.value == "quote ACME 1" })
        XCTAssertEqual(outcomes.withLock { $0 }, [.acquired])
    }

    func test_aFetchThatEnds_givesTheLeaseBack_soThatTheNextOneNeedNotWait() {
        let lease = MemoryLease()
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2))

        XCTAssertEqual(awaitResponse(store.freshValue(of: "ACME"))?.value, "quote ACME 1")
        XCTAssertTrue(eventually { !lease.isHeld("ACME") })
        // A refresh that found the lease held would wait past the watchdog for a value that never comes.
        XCTAssertEqual(
            awaitResponse(store.freshValue(of: "ACME"))?.value, "quote ACME 2", "the refresh took the lease at once")
    }

    func test_aSaveTheTimeoutGaveUpOn_keepsTheLeaseUntilItReallyEnds_soThatAWaiterTakesItsValueInsteadOfFetching() {
        let table = SharedTable()
        let lease = MemoryLease(savesOf: table)
        let upstream = SlowUpstream()
        // Waiting for the holder longer than the watchdog: the value arriving is the only way a wait ends in time.
        let instances = (0..<2).map { _ in
            Store(
                levels: [.cache(table, name: "shared", timeout: .milliseconds(50))],
                fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
                coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))
        }
        table.holdSaves()  // a database too busy to answer the save in time; its query lands later all the same

        XCTAssertEqual(awaitResponse(instances[0].read("ACME"))?.value, "quote ACME 1", "answered past the timeout")
        let waiter = LoadRecorder<StoreResponse<String>>()
        _ = waiter.load(instances[1].read("ACME"))
        XCTAssertTrue(eventually { lease.acquires >= 4 }, "the other instance waits, asking for the lease at each look")
        XCTAssertEqual(upstream.calls, 1, "the lease is still held: the save may land")

        table.releaseSaves()  // it lands

        XCTAssertTrue(eventually { waiter.values.first?.value == "quote ACME 1" }, "the holder's value, from the table")
        XCTAssertEqual(upstream.calls, 1)
        XCTAssertTrue(eventually { lease.log.last == "released ACME after 1 save" }, "given back once it landed")
    }

    func test_aFetchThatFails_givesTheLeaseBack() {
        let lease = MemoryLease()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (_: String) in FailingUpstream() },
            coordination: .lease(lease, sharedLevel: "shared"))

        XCTAssertNil(awaitResponse(store.read("ACME"))?.value)

        XCTAssertTrue(eventually { !lease.isHeld("ACME") }, "released, so that another instance may try")
    }

    func test_aWaitingFetch_cancelledByItsLastCaller_stopsWaiting_andNeverGoesUpstream() {
        let shared = SharedTable()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"))
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))

        let read = store.read("ACME").load { _ in XCTFail("a cancelled load never completes") }
        XCTAssertTrue(eventually { shared.reads >= 3 }, "the fetch found the lease held, and reads the shared level")
        read.cancel()
        let readsWhenCancelled = shared.reads
        // Proof of absence: a wait not cancelled reads the shared level every 5 ms.
        Thread.sleep(forTimeInterval: 0.2)

        XCTAssertLessThanOrEqual(shared.reads, readsWhenCancelled + 1, "the wait ended: at most the read under way")
        XCTAssertEqual(upstream.calls, 0)
    }

    func test_aValueTheHolderSaved_keepsItsDateAndLevel_andIsNotWrittenBackToTheSharedLevel() {
        let shared = SharedTable()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease")
        let upstream = SlowUpstream()
        let memory = MemoryCache<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        XCTAssertTrue(eventually { lease.acquires == 1 }, "the read missed, and its fetch found the lease held")
        let savedAt = Date()
        shared.put("quote from the holder", for: "ACME", savedAt: savedAt)  // the holder's save lands
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        let answer = response.withLock { $0 }
        XCTAssertEqual(answer?.value, "quote from the holder")
        XCTAssertEqual(answer?.origin, .cache("shared"), "an answer of the shared level, not of this process's fetch")
        XCTAssertEqual(answer?.savedAt?.timeIntervalSince(savedAt) ?? 1, 0, accuracy: 0.001, "the holder's date")
        XCTAssertEqual(shared.saves, 0, "not written back: the holder saved it")
        let kept = Locked<Date?>(nil)
        memory.value(for: "ACME") { result in kept.withLock { $0 = try? result.get().savedAt } }
        XCTAssertTrue(eventually { kept.withLock { $0 } != nil }, "promoted to the faster level")
        XCTAssertEqual(
            kept.withLock { $0 }?.timeIntervalSince(savedAt) ?? 1, 0, accuracy: 0.001,
            "the faster level keeps the holder's date")
        XCTAssertEqual(upstream.calls, 0)
    }

    func test_theLease_isGivenBackOnceTheFetchedValueReachedTheSharedLevel() {
        let shared = SharedTable()
        shared.holdSaves()
        let lease = MemoryLease(savesOf: shared)
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared"))

        let answered = expectation(description: "answered")
        store.read("ACME").load { _ in answered.fulfill() }
        XCTAssertTrue(eventually { shared.savesStarted == 1 }, "fetched, and saving to the shared level")
        // Proof of absence: a lease given back when the fetch ended would be back by now.
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertTrue(lease.isHeld("ACME"), "the value is not in the shared level yet: another process would fetch")
        shared.releaseSaves()

        wait(for: [answered], timeout: .watchdog)
        XCTAssertTrue(eventually { !lease.isHeld("ACME") })
        XCTAssertEqual(shared.saves, 1)
        XCTAssertEqual(lease.log, ["acquired ACME", "released ACME after 1 save"], "given back after the save")
    }

    func test_aProcessThatTakesTheLeaseJustAsItIsGivenBack_takesTheValueSavedMeanwhile() {
        let shared = SharedTable()
        // The other instance's save lands and it gives the lease back between this one's miss and its acquire.
        let lease = HandOverLease { shared.put("quote from the holder", for: "ACME", savedAt: Date()) }
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared"))

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote from the holder")
        XCTAssertEqual(upstream.calls, 0, "the value was there: no second upstream call")
        XCTAssertTrue(eventually { !lease.isHeld }, "and the lease it took is given back")
    }

    func test_aValueTheHolderFetchedBeforeThisReadBegan_butSavedAfterItMissed_isTheAnswer() {
        let shared = SharedTable()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease: its answer came, its save is on the way")
        let holdersAnswer = Date().addingTimeInterval(-1)
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        XCTAssertTrue(eventually { lease.acquires == 1 }, "the read missed: the shared level had nothing")
        shared.put("quote from the holder", for: "ACME", savedAt: holdersAnswer)
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        XCTAssertEqual(response.withLock { $0 }?.value, "quote from the holder", "newer than what the read found")
        XCTAssertEqual(upstream.calls, 0)
    }

    func test_aValueSavedWhileTheReadWentOnToALaterLevel_isTheAnswer_notASecondUpstreamCall() {
        // The shared level comes before a level of this instance's own: the read misses the shared level, and the
        // holder saves and gives the lease back while the read is at the later level.
        let shared = SharedTable()
        let own = HeldLevel()
        let lease = MemoryLease()
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared"), .cache(own, name: "own")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        XCTAssertTrue(eventually { own.readsStarted == 1 }, "the shared level missed; the read is at its own level")
        XCTAssertTrue(lease.take("ACME"), "another instance takes the lease")
        shared.put("quote from the holder", for: "ACME", savedAt: Date())
        lease.lapse("ACME")  // and gives it back once its value is saved
        own.answerReads()
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        XCTAssertEqual(response.withLock { $0 }?.value, "quote from the holder", "newer than what the read found")
        XCTAssertEqual(upstream.calls, 0, "one upstream call across the instances: the holder's")
    }

    func test_aKeyInvalidatedHere_doesNotTakeAValueSavedBeforeItsFetchBegan() {
        let shared = SharedTable()
        shared.put("old quote", for: "ACME", savedAt: Date().addingTimeInterval(-2))
        let lease = MemoryLease()
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(
                lease, sharedLevel: "shared", waiting: .milliseconds(200), polling: .milliseconds(5)))
        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "old quote")
        store.invalidate("ACME")
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease")
        let holdersAnswer = Date().addingTimeInterval(-1)

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        XCTAssertTrue(eventually { lease.acquires == 1 }, "the read's fetch found the lease held")
        shared.put("quote from before the invalidation", for: "ACME", savedAt: holdersAnswer)
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        XCTAssertEqual(response.withLock { $0 }?.value, "quote ACME 1", "fetched after its wait: nothing newer came")
        XCTAssertEqual(upstream.calls, 1)
    }

}

/// A lease held in memory, as a database row would hold it for every instance; it counts the store's acquires and
/// logs what the store did with it.
final class MemoryLease: FetchLease {
    private struct State {
        var held: Set<String> = []
        /// The failures left on leases, by key, with the window they were left for.
        var failures: [String: (failure: String, window: Duration)] = [:]
        var acquires = 0
        var log: [String] = []
    }
    private let state = Locked(State())
    /// The table whose saves the log counts when the lease is given back.
    private let table: SharedTable?

    init(savesOf table: SharedTable? = nil) {
        self.table = table
    }

    func isHeld(_ key: String) -> Bool { state.withLock { $0.held.contains(key) } }

    /// How many times the store asked for a lease.
    var acquires: Int { state.withLock { $0.acquires } }

    /// What the store did: "acquired KEY", "released KEY after N saves".
    var log: [String] { state.withLock { $0.log } }

    /// Takes the lease for a test (standing for another instance).
    func take(_ key: String) -> Bool { state.withLock { $0.held.insert(key).inserted } }

    /// The lease of `key` lapses (its holder died holding it, or the window of the failure left on it ended).
    func lapse(_ key: String) {
        state.withLock { state in
            state.held.remove(key)
            state.failures[key] = nil
        }
    }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        state.withLock { state in
            state.acquires += 1
            guard state.failures[key] == nil, state.held.insert(key).inserted else { return false }
            state.log.append("acquired \(key)")
            return true
        }
    }

    func release(_ key: String) async throws {
        let saves = table?.saves ?? 0
        state.withLock { state in
            state.held.remove(key)
            state.log.append("released \(key) after \(saves) save\(saves == 1 ? "" : "s")")
        }
    }

    func release(_ key: String, leaving failure: String, for duration: Duration) async throws {
        state.withLock { state in
            state.held.remove(key)
            state.failures[key] = (failure, duration)
            state.log.append("left “\(failure)” on \(key) for \(duration)")
        }
    }

    func failure(of key: String) async throws -> String? {
        state.withLock { $0.failures[key]?.failure }
    }
}

/// A lease that is free when asked, the previous holder having just done `handOver` (its save) and given it back.
private final class HandOverLease: FetchLease {
    private let handOver: @Sendable () -> Void
    private let held = Locked(false)

    init(handOver: @escaping @Sendable () -> Void) {
        self.handOver = handOver
    }

    var isHeld: Bool { held.withLock { $0 } }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        handOver()
        held.withLock { $0 = true }
        return true
    }

    func release(_ key: String) async throws {
        held.withLock { $0 = false }
    }
}

/// A level shared by instances: counts the reads and the saves the store makes, and holds its saves while told to.
final class SharedTable: AsyncKeyedCache {
    private struct State {
        var rows: [String: CachedValue<String>] = [:]
        var reads = 0
        var savesStarted = 0
        var saves = 0
        /// While saves are held: the saves waiting.
        var held: [CheckedContinuation<Void, Never>]?
        /// The failure each save ends with, when set.
        var failure: (any Error)?
    }
    private let state = Locked(State())

    var reads: Int { state.withLock { $0.reads } }
    var savesStarted: Int { state.withLock { $0.savesStarted } }
    var saves: Int { state.withLock { $0.saves } }

    /// Another instance's save, not counted.
    func put(_ value: String, for key: String, savedAt: Date) {
        state.withLock { $0.rows[key] = CachedValue(value, savedAt: savedAt) }
    }

    func holdSaves() { state.withLock { $0.held = $0.held ?? [] } }

    /// Every save from now on fails with `error` (once released, when held).
    func failSaves(with error: any Error) { state.withLock { $0.failure = error } }

    func releaseSaves() {
        let waiting = state.withLock { state in
            defer { state.held = nil }
            return state.held ?? []
        }
        for save in waiting { save.resume() }
    }

    func value(for key: String) async throws -> CachedValue<String>? {
        state.withLock { state in
            state.reads += 1
            return state.rows[key]
        }
    }

    func save(_ value: String, for key: String, savedAt: Date) async throws {
        await withCheckedContinuation { (save: CheckedContinuation<Void, Never>) in
            let isHeld = state.withLock { state in
                state.savesStarted += 1
                guard state.held != nil else { return false }
                state.held?.append(save)
                return true
            }
            if !isHeld { save.resume() }
        }
        try state.withLock { state in
            if let failure = state.failure { throw failure }
            state.saves += 1
            state.rows[key] = CachedValue(value, savedAt: savedAt)
        }
    }

    func removeValue(for key: String) async throws { _ = state.withLock { $0.rows.removeValue(forKey: key) } }
    func removeAll() async throws { state.withLock { $0.rows = [:] } }
}

/// An instance's own level, empty, whose reads wait until the test answers them.
private final class HeldLevel: AsyncKeyedCache {
    private struct State {
        var readsStarted = 0
        var isOpen = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Locked(State())

    var readsStarted: Int { state.withLock { $0.readsStarted } }

    /// Answers the reads waiting, and every later read at once: nothing is here.
    func answerReads() {
        let waiting = state.withLock { state in
            defer { state.waiting = [] }
            state.isOpen = true
            return state.waiting
        }
        for read in waiting { read.resume() }
    }

    func value(for key: String) async throws -> CachedValue<String>? {
        await withCheckedContinuation { (read: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state in
                state.readsStarted += 1
                if !state.isOpen { state.waiting.append(read) }
                return state.isOpen
            }
            if isOpen { read.resume() }
        }
        return nil
    }

    func save(_ value: String, for key: String, savedAt: Date) async throws {}
    func removeValue(for key: String) async throws {}
    func removeAll() async throws {}
}

/// A lease whose database stopped answering: each acquire waits, deaf to cancellation (as a client waiting for a
/// connection), until the test answers it (the lease is then taken); releases are counted.
private final class SilentLease: FetchLease {
    private let waiting = Locked<[CheckedContinuation<Bool, Never>]>([])
    private let released = Locked(0)

    var releases: Int { released.withLock { $0 } }

    /// How many acquires wait for an answer.
    var pendingAcquires: Int { waiting.withLock { $0.count } }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        await withCheckedContinuation { continuation in waiting.withLock { $0.append(continuation) } }
    }

    func release(_ key: String) async throws {
        released.withLock { $0 += 1 }
    }

    func answerEveryAcquire() {
        let answered = waiting.withLock { waiting in
            defer { waiting = [] }
            return waiting
        }
        for acquire in answered { acquire.resume(returning: true) }
    }
}

/// A shared level whose reads fail: its database cannot be reached.
private struct UnreadableTable: AsyncKeyedCache {
    func value(for key: String) async throws -> CachedValue<String>? { throw URLError(.cannotConnectToHost) }
    func save(_ value: String, for key: String, savedAt: Date) async throws {}
    func removeValue(for key: String) async throws {}
    func removeAll() async throws {}
}

/// A lease whose database cannot be reached.
struct UnreachableLease: FetchLease {
    func acquire(_ key: String, for duration: Duration) async throws -> Bool { throw URLError(.cannotConnectToHost) }
    func release(_ key: String) async throws { throw URLError(.cannotConnectToHost) }
}

/// An upstream counting its calls, whose answer says which call it was: at once, or once the test opens it.
final class SlowUpstream: Sendable {
    enum Answers {
        case atOnce, whenOpened
    }

    private struct State {
        var calls = 0
        var isOpen: Bool
        var held: [@Sendable () -> Void] = []
    }
    private let state: Locked<State>

    init(answers: Answers = .atOnce) {
        state = Locked(State(isOpen: answers == .atOnce))
    }

    var calls: Int { state.withLock { $0.calls } }

    /// Answers the calls held, and every later call at once.
    func open() {
        let held = state.withLock { state in
            defer { state.held = [] }
            state.isOpen = true
            return state.held
        }
        for answer in held { answer() }
    }

    func loader(for key: String) -> AnyLoader<String> {
        AnyLoader { [state] completion in
            let answer = state.withLock { state -> (@Sendable () -> Void)? in
                state.calls += 1
                let call = state.calls
                let answer: @Sendable () -> Void = { completion(.success("quote \(key) \(call)")) }
                guard state.isOpen else {
                    state.held.append(answer)
                    return nil
                }
                return answer
            }
            answer?()
            return Inert()
        }
    }
}

/// An upstream that always fails.
private struct FailingUpstream: Loader {
    func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
        completion(.failure(URLError(.badServerResponse)))
        return Inert()
    }
}

/// A token with nothing to cancel.
private struct Inert: CancellationToken {
    func cancel() {}
}
