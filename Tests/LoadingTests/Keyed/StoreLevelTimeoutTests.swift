import Foundation
import Loading
import LoadingTestHelpers
import XCTest

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
        try await waitUntil { await table.row("a") != nil }
        let saved = await table.row("a")
        XCTAssertEqual(saved?.value, "fresh a")
        XCTAssertEqual(saved?.savedAt, start, "saved with the store's clock, not the table's")
    }

    func test_asyncLevel_hit_isServedWithItsLevelsNameAndDate() async throws {
        let table = AsyncTable()
        await table.put("a", "cached a", savedAt: start)
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
        await table.put("a", "cached a", savedAt: start)
        let clock = TestClock(start.addingTimeInterval(2.5))
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(table, name: "table")],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") }, keptValues: 0, now: clock.now)

        let first = try await store.read("a", policy: .cacheFirst).load()
        XCTAssertEqual(first.origin, .cache("table"))
        try await waitUntil { (try? memory.cachedValue(for: "a").get()) != nil }

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
        try await waitUntil { await table.cancelledReads == 1 }
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
        try await waitUntil { await table.readsStarted == 1 }
        read.cancel()

        try await waitUntil { await table.cancelledReads == 1 }
        try await Task.sleep(for: .milliseconds(20))
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
        let store = Store(
            levels: [.cache(SilentCache(), name: "silent", timeout: .milliseconds(200))],
            fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })
        let waits = Locked<[Duration]>([])
        let answered = DispatchGroup()

        for index in 0..<10 {
            answered.enter()
            let started = ContinuousClock.now
            _ = store.read("key \(index)").load { _ in
                waits.withLock { $0.append(ContinuousClock.now - started) }
                answered.leave()
            }
            Thread.sleep(forTimeInterval: 0.03)
        }

        XCTAssertEqual(answered.wait(timeout: .now() + .watchdog), .success)
        let all = waits.withLock { $0 }
        XCTAssertEqual(all.count, 10)
        XCTAssertTrue(all.allSatisfy { $0 >= .milliseconds(200) }, "none before its deadline: \(all)")
        XCTAssertTrue(all.allSatisfy { $0 < .seconds(2) }, "each soon after it: \(all)")
    }

    func test_aSaveThatTakesTooLong_isReported_andTheStoreKeepsTheValue() async throws {
        let failures = Locked<[any Error]>([])
        let store = Store(
            levels: [.cache(AsyncTable(hangs: true), name: "table", timeout: .milliseconds(50))],
            fetch: LoaderFamily { (_: String) in Fails<String>() }, keptValues: 0,
            onWriteFailure: { error in failures.withLock { $0.append(error) } })

        store.write("written", for: "a")

        try await waitUntil { failures.withLock { !$0.isEmpty } }
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
        let table = AsyncTable()
        await table.put("a", "cached a", savedAt: start)
        let store = Store(
            levels: [.cache(table, name: "table", timeout: .milliseconds(500))],
            fetch: LoaderFamily { (_: String) in Fails<String>() }, now: TestClock(start).now)

        let response = try await store.read("a", policy: .cacheFirst).load()
        try await Task.sleep(for: .milliseconds(600))  // past the timeout

        XCTAssertEqual(response.value, "cached a")
        let cancelled = await table.cancelledReads
        XCTAssertEqual(cancelled, 0)
    }

    func test_aTaskLocalValue_reachesTheAsyncLevel() async throws {
        let table = AsyncTable()
        let store = Store(
            levels: [.cache(table, name: "table")], fetch: LoaderFamily { (key: String) in Just("fresh \(key)") })

        _ = try await Request.$id.withValue("r-42") { try await store.read("a", policy: .cacheFirst).load() }

        let seen = await table.requestIDs
        XCTAssertEqual(seen.first, "r-42")
    }
}

/// Waits until `condition` holds, up to five seconds; fails the test when it does not.
private func waitUntil(
    _ condition: @Sendable () async -> Bool, file: StaticString = #filePath, line: UInt = #line
) async throws {
    let deadline = ContinuousClock.now + .seconds(5)
    while !(await condition()) {
        guard ContinuousClock.now < deadline else { return XCTFail("timed out", file: file, line: line) }
        try await Task.sleep(for: .milliseconds(2))
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
private actor AsyncTable: AsyncKeyedCache {
    private var rows: [String: CachedValue<String>] = [:]
    private let failing: Bool
    private let hangs: Bool
    private(set) var cancelledReads = 0
    private(set) var readsStarted = 0
    private(set) var requestIDs: [String?] = []

    init(failing: Bool = false, hangs: Bool = false) {
        self.failing = failing
        self.hangs = hangs
    }

    func row(_ key: String) -> CachedValue<String>? { rows[key] }
    func put(_ key: String, _ value: String, savedAt: Date) { rows[key] = CachedValue(value, savedAt: savedAt) }

    func value(for key: String) async throws -> CachedValue<String>? {
        requestIDs.append(Request.id)
        readsStarted += 1
        try await answer()
        if Task.isCancelled { cancelledReads += 1 }
        return rows[key]
    }

    func save(_ value: String, for key: String, savedAt: Date) async throws {
        try await answer()
        rows[key] = CachedValue(value, savedAt: savedAt)
    }

    func removeValue(for key: String) async throws {
        try await answer()
        rows[key] = nil
    }

    func removeAll() async throws {
        try await answer()
        rows = [:]
    }

    private func answer() async throws {
        if failing { throw URLError(.cannotConnectToHost) }
        guard hangs else { return }
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
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
