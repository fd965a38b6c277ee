import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Levels over async caches, levels with a timeout, and the dates the store saves values with: a level that fails or
/// takes too long counts as a miss, and a value keeps its age in every level.
final class StoreLevelTimeoutTests: XCTestCase {
    private let start = Date(timeIntervalSinceReferenceDate: 1_000_000)

    // MARK: Async levels

    func test_asyncLevel_missThenFetch_savesTheFetchedValueWithTheStoresDate() async throws {
        let clock = TestClock(start)
        let table = AsyncTable()
        let store = Store(
            levels: [.cache(table, name: "table")], fetch: LoaderFamily { (key: String) in Just("fresh \(key)") },
            now: clock.now)

        let response = try await store.read("a", policy: .cacheFirst).load()

        XCTAssertEqual(response.value, "fresh a")
        XCTAssertEqual(response.origin, .network)
        let isSaved = await eventually { table.row("a") != nil }
        XCTAssertTrue(isSaved, "saved to the table")
        let saved = table.row("a")
        XCTAssertEqual(saved?.value, "fresh a")
        XCTAssertEqual(saved?.savedAt, start, "saved with the store's clock, not the table's")
    }

    func test_asyncLevel_hit_isServedWithItsLevelsNameAndDate() async throws {
        let table = AsyncTable()
        table.put("a", "cached a", savedAt: start)
        let store = Store(
            levels: [.cache(table, name: "table")], fetch: LoaderFamily { (_: String) in Fails<String>() },
            now: TestClock(start.addingTimeInterval(1)).now)

        let response = try await store.read("a", policy: .cacheFirst).load()

        XCTAssertEqual(response.value, "cached a")
        XCTAssertEqual(response.origin, .cache("table"))
        XCTAssertEqual(response.savedAt, start)
    }

    func test_asyncLevel_thatFails_countsAsAMiss() async throws {
        let table = AsyncTable(failing: true)
        let store = Store(
            levels: [.cache(table, name: "table")], fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })

        let response = try await store.read("a", policy: .cacheFirst).load()

        XCTAssertEqual(response.value, "fresh a")
        XCTAssertEqual(response.origin, .network)
    }

    // MARK: Promotion keeps the age

    func test_aValueCopiedFromASlowerLevel_keepsItsSaveDateInTheFasterOne() async throws {
        let memory = MemoryCache<String, String>(now: { Date(timeIntervalSinceReferenceDate: 0) })
        let table = AsyncTable()
        table.put("a", "cached a", savedAt: start)
        let clock = TestClock(start.addingTimeInterval(2.5))
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(table, name: "table")],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") }, keptValues: 0, now: clock.now)

        let first = try await store.read("a", policy: .cacheFirst).load()
        XCTAssertEqual(first.origin, .cache("table"))
        let isCopied = await eventually { (try? memory.cachedValue(for: "a").get()) != nil }
        XCTAssertTrue(isCopied, "copied to memory")

        XCTAssertEqual(try memory.cachedValue(for: "a").get().savedAt, start, "2.5 s old in memory too")
        let again = try await store.read("a", policy: .cacheFirst).load()
        XCTAssertEqual(again.origin, .cache("memory"))
        XCTAssertEqual(again.savedAt, start)
        let fresh = try await store.read("a", policy: .cacheFirst(maxAge: .seconds(2))).load()
        XCTAssertEqual(fresh.value, "fresh a", "a value 2.5 s old is not fresh for 2 s: fetched")
    }

    func test_diskCache_keepsTheDateTheStoreGives() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("level-dates-\(UUID())")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        let disk = DiskCache<String, String>(directory: folder, now: { Date(timeIntervalSinceReferenceDate: 0) })
        let saved = expectation(description: "saved")
        disk.save("v", for: "k", savedAt: start) { _ in saved.fulfill() }
        wait(for: [saved], timeout: .watchdog)
        let read = expectation(description: "read")
        let start = start
        disk.value(for: "k") { result in
            XCTAssertEqual(try? result.get().savedAt, start)
            read.fulfill()
        }
        wait(for: [read], timeout: .watchdog)
    }

    // MARK: Timeouts

    func test_asyncLevelRead_thatTakesTooLong_isCancelled_andTheReadFetches() async throws {
        let table = AsyncTable(hangs: true)
        let store = Store(
            levels: [.cache(table, name: "table", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })

        let response = try await store.read("a", policy: .cacheFirst).load()

        XCTAssertEqual(response.value, "fresh a")
        XCTAssertEqual(response.origin, .network)
        let wasCancelled = await eventually { table.cancelledReads == 1 }
        XCTAssertTrue(wasCancelled, "the table's read was cancelled")
    }

    func test_aCancelledRead_cancelsItsAsyncLevelRead() async throws {
        let table = AsyncTable(hangs: true)
        let fetches = Locked(0)
        let store = Store(
            levels: [.cache(table, name: "table")],
            fetch: LoaderFamily { (key: String) in
                fetches.withLock { $0 += 1 }
                return Just("fresh \(key)")
            })

        let answered = Locked(false)
        let read = store.read("a", policy: .cacheFirst).load { _ in answered.withLock { $0 = true } }
        let isRead = await eventually { table.readsStarted == 1 }
        XCTAssertTrue(isRead, "the table is read")
        read.cancel()

        let wasCancelledToo = await eventually { table.cancelledReads == 1 }
        XCTAssertTrue(wasCancelledToo, "the table's read was cancelled")
        // Proof of absence: the table's read returned; a load it completes, or a fetch it starts, comes right after.
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertFalse(answered.withLock { $0 }, "a cancelled load never completes")
        XCTAssertEqual(fetches.withLock { $0 }, 0, "nor does it fetch")
    }

    func test_callbackLevelRead_thatNeverAnswers_timesOut_andTheReadFetches() async throws {
        let store = Store(
            levels: [.cache(SilentCache(), name: "silent", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })

        let response = try await store.read("a", policy: .cacheFirst).load()

        XCTAssertEqual(response.value, "fresh a")
    }

    func test_readsStartedAtDifferentTimes_eachTimeOutAtTheirOwnDeadline_neverBefore() {
        let scheduler = TestScheduler()
        let timedOutAt = Locked<[String: Duration]>([:])
        let answered = Locked(0)
        let store = Store(
            levels: [.cache(SilentCache(), name: "silent", timeout: .milliseconds(200), scheduler: scheduler)],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") },
            events: { event in
                guard case .levelRead(let key, _, .failed(let error)) = event, error is LevelTimeoutError else {
                    return
                }
                timedOutAt.withLock { $0[key] = scheduler.now }
            })

        for index in 0..<10 {
            _ = store.read("key \(index)").load { _ in answered.withLock { $0 += 1 } }
            scheduler.advance(by: .milliseconds(30))
        }
        // Each read's timeout, then its fetch's save to the silent level, which times out too.
        scheduler.advance(by: .seconds(1))

        XCTAssertEqual(answered.withLock { $0 }, 10, "every read answered once its level timed out")
        let all = timedOutAt.withLock { $0 }
        for index in 0..<10 {
            let deadline = .milliseconds(30) * index + .milliseconds(200)
            guard let timedOut = all["key \(index)"] else {
                XCTFail("the read of key \(index) did not time out: \(all)")
                continue
            }
            XCTAssertGreaterThanOrEqual(timedOut, deadline, "read \(index) not before its deadline")
            XCTAssertLessThanOrEqual(timedOut, deadline + .milliseconds(50), "read \(index) within a quarter after")
        }
    }

    func test_aSaveThatTakesTooLong_isReported_andTheStoreKeepsTheValue() async throws {
        let failures = Locked<[any Error]>([])
        let store = Store(
            levels: [.cache(AsyncTable(hangs: true), name: "table", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (_: String) in Fails<String>() }, keptValues: 0,
            onWriteFailure: { error in failures.withLock { $0.append(error) } })

        store.write("written", for: "a")

        let wasTold = await eventually { failures.withLock { !$0.isEmpty } }
        XCTAssertTrue(wasTold, "the failure was told")
        let error = try XCTUnwrap(failures.withLock { $0.first } as? LevelTimeoutError)
        XCTAssertEqual(error, LevelTimeoutError(level: "table", operation: .save, interval: .milliseconds(50)))
        XCTAssertEqual(error.localizedDescription, "The level “table” did not finish a save within 0.05 seconds.")
        let kept = try await store.read("a", policy: .cacheOnly).load()
        XCTAssertEqual(kept.value, "written", "a value no level could save stays in the store")
    }

    func test_clear_withALevelThatNeverAnswers_completesWithinTheTimeout_andReportsIt() {
        let failures = Locked<[any Error]>([])
        let store = Store(
            levels: [.cache(SilentCache(), name: "silent", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (_: String) in Fails<String>() },
            onWriteFailure: { error in failures.withLock { $0.append(error) } })

        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }

        wait(for: [cleared], timeout: .watchdog)
        XCTAssertEqual(
            failures.withLock { $0 } as? [LevelTimeoutError],
            [LevelTimeoutError(level: "silent", operation: .removalOfEveryValue, interval: .milliseconds(50))])
    }

    func test_aLevelThatAnswersInTime_isNotTimedOut_andALateTimerChangesNothing() async throws {
        let scheduler = TestScheduler()
        let table = AsyncTable()
        table.put("a", "cached a", savedAt: start)
        let store = Store(
            levels: [.cache(table, name: "table", timeout: .milliseconds(500), scheduler: scheduler)],
            fetch: LoaderFamily { (_: String) in Fails<String>() }, now: TestClock(start).now)

        let response = try await store.read("a", policy: .cacheFirst).load()  // no time passed
        XCTAssertGreaterThan(scheduler.pendingCount, 0, "the level's timer is still set")
        scheduler.advance(by: .seconds(1))  // past the timeout: the timer runs

        XCTAssertEqual(response.value, "cached a")
        XCTAssertEqual(table.cancelledReads, 0)
        XCTAssertEqual(scheduler.pendingCount, 0, "and stops, no operation running")
    }

    func test_aTaskLocalValue_reachesTheAsyncLevel() async throws {
        let table = AsyncTable()
        let store = Store(
            levels: [.cache(table, name: "table")], fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })

        _ = try await Request.$id.withValue("r-42") { try await store.read("a", policy: .cacheFirst).load() }

        let seen = table.requestIDs
        XCTAssertEqual(seen.first, "r-42")
    }
}

/// A token with nothing to cancel.
private struct Finished: CancellationToken {
    func cancel() {}
}

/// The request a test's read belongs to, as a server would keep it.
private enum Request {
    @TaskLocal static var id: String?
}

/// A clock a test sets.
private final class TestClock: Sendable {
    private let date: Locked<Date>
    init(_ date: Date) { self.date = Locked(date) }
    var now: @Sendable () -> Date { { [date] in date.withLock { $0 } } }
}

/// A table behind an async API: it can fail every operation, or never answer until cancelled.
private final class AsyncTable: AsyncKeyedCache {
    private struct State {
        var rows: [String: CachedValue<String>] = [:]
        var cancelledReads = 0
        var readsStarted = 0
        var requestIDs: [String?] = []
    }
    private let state = Locked(State())
    private let failing: Bool
    private let hangs: Bool

    init(failing: Bool = false, hangs: Bool = false) {
        self.failing = failing
        self.hangs = hangs
    }

    var cancelledReads: Int { state.withLock { $0.cancelledReads } }
    var readsStarted: Int { state.withLock { $0.readsStarted } }
    var requestIDs: [String?] { state.withLock { $0.requestIDs } }

    func row(_ key: String) -> CachedValue<String>? { state.withLock { $0.rows[key] } }
    func put(_ key: String, _ value: String, savedAt: Date) {
        state.withLock { $0.rows[key] = CachedValue(value, savedAt: savedAt) }
    }

    func value(for key: String) async throws -> CachedValue<String>? {
        state.withLock { state in
            state.requestIDs.append(Request.id)
            state.readsStarted += 1
        }
        try await answer()
        return state.withLock { state in
            if Task.isCancelled { state.cancelledReads += 1 }
            return state.rows[key]
        }
    }

    func save(_ value: String, for key: String, savedAt: Date) async throws {
        try await answer()
        put(key, value, savedAt: savedAt)
    }

    func removeValue(for key: String) async throws {
        try await answer()
        state.withLock { $0.rows[key] = nil }
    }

    func removeAll() async throws {
        try await answer()
        state.withLock { $0.rows = [:] }
    }

    private func answer() async throws {
        if failing { throw URLError(.cannotConnectToHost) }
        if hangs { await hangUntilCancelled() }
    }
}

/// A cache that never answers.
private struct SilentCache: KeyedCache {
    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {}
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {}
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {}
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {}
}

/// A loader that answers `value` at once.
private struct Just: Loader {
    let value: String
    init(_ value: String) { self.value = value }
    func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
        completion(.success(value))
        return Finished()
    }
}

/// A loader that always fails.
private struct Fails<Output: Sendable>: Loader {
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        completion(.failure(URLError(.notConnectedToInternet)))
        return Finished()
    }
}
