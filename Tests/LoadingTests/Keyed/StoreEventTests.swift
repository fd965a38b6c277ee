import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A store's events, as a server's logs, metrics and traces read them: every level read with its outcome, every
/// level write with its key, level and failure, every fetch started, joined and ended.
final class StoreEventTests: XCTestCase {
    func test_aReadThatMissesEveryLevel_tellsEachLevelsMiss_thenTheFetch() throws {
        let events = EventLog()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(FailingCache(), name: "disk")],
            fetch: LoaderFamily { (key: String) in Answering(.success("fresh \(key)")) }, keptValues: 0,
            events: events.record)

        XCTAssertEqual(try awaitLoad(store.read("a")).value, "fresh a")

        XCTAssertEqual(
            events.lines,
            [
                "read a memory miss", "read a disk failed", "fetch a started 1", "fetch a ended 1",
                "save a memory", "save a disk failed",
            ])
    }

    func test_eachLevelOperationAndTheUpstreamCall_isToldWithItsDuration_rightAfterWhatItFound() throws {
        let events = EventLog()
        let upstream = HeldUpstream()
        let disk = HeldReadsCache()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { (_: String) in upstream }, keptValues: 0, events: events.record)

        let answered = expectation(description: "answered")
        let beforeTheRead = ContinuousClock.now
        store.read("a").load { _ in answered.fulfill() }
        XCTAssertTrue(eventually { disk.pendingReads == 1 })
        let diskReadPending = ContinuousClock.now
        let beforeTheDiskAnswers = ContinuousClock.now
        disk.answerReads()
        XCTAssertTrue(eventually { upstream.pendingCalls == 1 })
        let upstreamCallPending = ContinuousClock.now
        let beforeTheUpstreamAnswers = ContinuousClock.now
        upstream.answer(with: .success("v"))
        wait(for: [answered], timeout: .watchdog)
        let afterTheAnswer = ContinuousClock.now

        XCTAssertEqual(
            events.linesWithDurations,
            [
                "read a memory miss", "took read a memory", "read a disk miss", "took read a disk", "fetch a started 1",
                "took upstream a 1", "fetch a ended 1", "save a memory", "took save a memory", "save a disk",
                "took save a disk",
            ])
        let diskRead = try XCTUnwrap(events.levelDurations.first { $0.level == "disk" }?.duration)
        // From the operation's start to its answer: no shorter than what surely lay between, no longer than all.
        XCTAssertGreaterThanOrEqual(diskRead, beforeTheDiskAnswers - diskReadPending)
        XCTAssertLessThanOrEqual(diskRead, afterTheAnswer - beforeTheRead)
        let upstreamCall = try XCTUnwrap(events.upstreamDurations.first)
        XCTAssertGreaterThanOrEqual(upstreamCall, beforeTheUpstreamAnswers - upstreamCallPending)
        XCTAssertLessThanOrEqual(upstreamCall, afterTheAnswer - diskReadPending, "it began after the disk read")
    }

    func test_aLevelHit_isToldWithItsSaveDate_andAHeldValue_asHeld() throws {
        let events = EventLog()
        let memory = MemoryCache<String, String>()
        let saved = Date(timeIntervalSinceReferenceDate: 500)
        memory.save("cached", for: "a", savedAt: saved) { _ in }
        let store = Store(
            levels: [.cache(memory, name: "memory")],
            fetch: LoaderFamily { (_: String) in Answering<String>(.failure(URLError(.notConnectedToInternet))) },
            events: events.record)

        XCTAssertEqual(try awaitLoad(store.read("a")).value, "cached")
        XCTAssertEqual(try awaitLoad(store.read("a")).value, "cached")

        XCTAssertEqual(events.lines, ["read a memory hit 500", "held a"])
    }

    func test_callersOfOneKey_shareOneFetch_toldAsOneStartAndJoins_andItsDuration() throws {
        let events = EventLog()
        let upstream = HeldUpstream()
        let store = Store(
            levels: [], fetch: LoaderFamily { (_: String) in upstream }, events: events.record)

        let answered = DispatchGroup()
        let beforeTheFirstRead = ContinuousClock.now
        for _ in 0..<20 {
            answered.enter()
            store.read("a", policy: .networkOnly).load { _ in answered.leave() }
        }
        let afterTheLastRead = ContinuousClock.now
        let beforeTheAnswer = ContinuousClock.now
        upstream.answer(with: .success("v"))
        let afterTheAnswer = ContinuousClock.now
        XCTAssertEqual(answered.wait(timeout: .now() + .watchdog), .success)

        XCTAssertEqual(events.lines.filter { $0.hasPrefix("fetch a started") }, ["fetch a started 1"])
        XCTAssertEqual(events.lines.filter { $0 == "fetch a joined 1" }.count, 19)
        XCTAssertEqual(events.lines.filter { $0.hasPrefix("fetch a ended") }, ["fetch a ended 1"])
        let duration = try XCTUnwrap(events.durations.first)
        // From the start (during the reads) to the answer: no shorter than what surely lay between, no longer than all.
        XCTAssertGreaterThanOrEqual(duration, beforeTheAnswer - afterTheLastRead, "from the start to the answer")
        XCTAssertLessThanOrEqual(duration, afterTheAnswer - beforeTheFirstRead, "from the start to the answer")
    }

    func test_aFailedFetch_endsWithItsError() throws {
        let events = EventLog()
        let store = Store(
            levels: [],
            fetch: LoaderFamily { (_: String) in Answering<String>(.failure(URLError(.timedOut))) },
            events: events.record)

        XCTAssertThrowsError(try awaitLoad(store.read("a")))

        XCTAssertEqual(events.lines, ["fetch a started 1", "fetch a ended 1 failed"])
    }

    func test_writesRemovalsAndClears_areToldWithTheirKeyLevelAndFailure() {
        let events = EventLog()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(FailingCache(), name: "disk")],
            fetch: LoaderFamily { (_: String) in Answering<String>(.failure(URLError(.timedOut))) },
            events: events.record)

        store.write("v", for: "a")
        store.remove("a")
        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)

        XCTAssertEqual(
            events.lines,
            [
                "save a memory", "save a disk failed", "removal a memory", "removal a disk failed",
                "removal of every value - memory", "removal of every value - disk failed",
            ])
    }

    func test_aKeptValueLetGoOfForTheBound_isToldAsEvicted() {
        let events = EventLog()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (key: String) in Answering(.success("fresh \(key)")) }, keptValues: 2,
            events: events.record)

        for key in ["a", "b", "c", "d"] { store.write(key, for: key) }

        XCTAssertEqual(events.lines.filter { $0.hasPrefix("evicted") }, ["evicted a", "evicted b"])
    }

    func test_trimMemory_letsGoOfTheKeptValues_notTheObservedOnes_andTheLevelsAnswerForThem() throws {
        let events = EventLog()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (key: String) in Answering(.success("fresh \(key)")) }, events: events.record)
        let observed = store.changes(for: "c").sink { _ in }
        defer { observed.cancel() }
        for key in ["a", "b", "c"] { store.write(key, for: key) }
        XCTAssertEqual(store.count, 3)

        store.trimMemory()

        XCTAssertEqual(store.count, 1, "the observed key stays")
        XCTAssertEqual(events.lines.filter { $0.hasPrefix("evicted") }, ["evicted a", "evicted b"])
        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a", policy: .cacheOnly))
        XCTAssertEqual(read.values.first?.value, "a")
        XCTAssertEqual(read.values.first?.origin, .cache("memory"), "read from its level again")
    }

    func test_aFetchStarted_isToldInTheCallersTask() async throws {
        let seen = Locked<[String?]>([])
        let store = Store(
            levels: [], fetch: LoaderFamily { (key: String) in Answering(.success(key)) },
            events: { event in
                if case .fetchStarted = event { seen.withLock { $0.append(Trace.id) } }
            })

        _ = try await Trace.$id.withValue("trace-7") { try await store.read("a").load() }

        XCTAssertEqual(seen.withLock { $0 }, ["trace-7"])
    }

    func test_aCoalescedFamily_tellsOneStartTheJoinsAndOneEnd_andACancelledFlightEnds() throws {
        let events = EventLog()
        let upstream = HeldUpstream()
        let family = LoaderFamily { (_: String) in upstream }.coalesced(events: events.record)

        let answered = DispatchGroup()
        for _ in 0..<5 {
            answered.enter()
            family["a"].load { _ in answered.leave() }
        }
        upstream.answer(with: .success("v"))
        XCTAssertEqual(answered.wait(timeout: .now() + .watchdog), .success)
        family["b"].load { _ in XCTFail("a cancelled load never completes") }.cancel()

        XCTAssertEqual(
            events.lines,
            [
                "fetch a started 1", "fetch a joined 1", "fetch a joined 1", "fetch a joined 1", "fetch a joined 1",
                "fetch a ended 1", "fetch b started 2", "fetch b ended 2 failed",
            ])
    }

    // MARK: - Helpers

    private func awaitLoad(_ loader: AnyLoader<StoreResponse<String>>) throws -> StoreResponse<String> {
        let result = Locked<Result<StoreResponse<String>, any Error>?>(nil)
        let done = expectation(description: "loaded")
        loader.load { outcome in
            result.withLock { $0 = outcome }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }
}

/// The trace a test's read belongs to.
private enum Trace {
    @TaskLocal static var id: String?
}

/// The events a store told, as lines.
private final class EventLog: Sendable {
    private let events = Locked<[StoreEvent<String>]>([])

    var record: @Sendable (StoreEvent<String>) -> Void {
        { [events] event in events.withLock { $0.append(event) } }
    }

    /// One line per event but the durations of level operations and upstream calls; fetches are numbered in the
    /// order they started, from 1.
    var lines: [String] {
        linesWithDurations.filter { !$0.hasPrefix("took") }
    }

    /// One line per event, the durations of level operations and upstream calls as "took …" lines.
    var linesWithDurations: [String] {
        var numbers: [Int: Int] = [:]
        func number(_ fetch: Int) -> Int {
            if let known = numbers[fetch] { return known }
            numbers[fetch] = numbers.count + 1
            return numbers.count
        }
        return events.withLock { $0 }.map { event in
            switch event {
            case .heldValueRead(let key): "held \(key)"
            case .evicted(let key): "evicted \(key)"
            case .levelRead(let key, let level, .hit(let savedAt)):
                "read \(key) \(level) hit \(Int(savedAt.timeIntervalSinceReferenceDate))"
            case .levelRead(let key, let level, .miss): "read \(key) \(level) miss"
            case .levelRead(let key, let level, .failed): "read \(key) \(level) failed"
            case .levelWritten(let key, let level, let operation, let error):
                "\(operation.rawValue) \(key ?? "-") \(level)" + (error == nil ? "" : " failed")
            case .fetchStarted(let key, let fetch): "fetch \(key) started \(number(fetch))"
            case .fetchJoined(let key, let fetch): "fetch \(key) joined \(number(fetch))"
            case .fetchEnded(let key, let fetch, _, let error):
                "fetch \(key) ended \(number(fetch))" + (error == nil ? "" : " failed")
            case .fetchCoordinated(let key, let fetch, let outcome, _):
                "fetch \(key) coordinated \(number(fetch)) \(outcome.rawValue)"
            case .levelOperationEnded(let key, let level, let operation, _, let error):
                "took \(operation.rawValue) \(key ?? "-") \(level)" + (error == nil ? "" : " failed")
            case .upstreamCalled(let key, let fetch, _, let error):
                "took upstream \(key) \(number(fetch))" + (error == nil ? "" : " failed")
            }
        }
    }

    /// The durations of the fetches that ended.
    var durations: [Duration] {
        events.withLock { $0 }.compactMap { event in
            if case .fetchEnded(_, _, let duration, _) = event { duration } else { nil }
        }
    }

    /// The durations of the upstream calls that ended.
    var upstreamDurations: [Duration] {
        events.withLock { $0 }.compactMap { event in
            if case .upstreamCalled(_, _, let duration, _) = event { duration } else { nil }
        }
    }

    /// The durations of the level operations that ended, with their level.
    var levelDurations: [(level: String, duration: Duration)] {
        events.withLock { $0 }.compactMap { event in
            if case .levelOperationEnded(_, let level, _, let duration, _) = event { (level, duration) } else { nil }
        }
    }
}

/// A cache whose every operation fails at once.
private struct FailingCache: KeyedCache {
    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileReadCorruptFile)))
    }
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteOutOfSpace)))
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteNoPermission)))
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteNoPermission)))
    }
}

/// A loader that answers `result` at once.
private struct Answering<Output: Sendable>: Loader {
    let result: Result<Output, any Error>
    init(_ result: Result<Output, any Error>) { self.result = result }
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        completion(result)
        return Idle()
    }
}

/// An upstream that holds its loads until told to answer.
private final class HeldUpstream: Loader, Sendable {
    private let waiting = Locked<[LoadCompletion<String>]>([])

    /// How many calls wait for an answer.
    var pendingCalls: Int { waiting.withLock { $0.count } }

    func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
        waiting.withLock { $0.append(completion) }
        return Idle()
    }

    func answer(with result: Result<String, any Error>) {
        for completion in waiting.withLock({ exchange(&$0, with: []) }) { completion(result) }
    }
}

/// A token with nothing to cancel.
private struct Idle: CancellationToken {
    func cancel() {}
}

/// A level that holds every read until told to answer it (with no value); it saves nothing.
private final class HeldReadsCache: KeyedCache {
    private let reads = Locked<[@Sendable () -> Void]>([])

    /// How many reads wait for an answer.
    var pendingReads: Int { reads.withLock { $0.count } }

    /// Answers the reads that wait: no value.
    func answerReads() {
        for answer in reads.withLock({ exchange(&$0, with: []) }) { answer() }
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        reads.withLock { $0.append { completion(.failure(CacheMiss.absent)) } }
    }
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
}
