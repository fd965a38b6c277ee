import Foundation
import Loading
import LoadingTestSupport
import XCTest

final class TraceTests: XCTestCase {
    func test_aTracedLoad_reportsItsStartEachStepEachRetryAndItsEnd_withDurations() {
        let events = EventLog()
        let memory = LoaderSpy<Int>()
        let network = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let sut = TracedLoader("friends", observer: events.record) { trace in
            memory.step("memory", of: trace)
                .fallback(
                    to: network.retry(.constant(.seconds(1), maxAttempts: 2).reporting(to: trace), scheduler: scheduler)
                        .step("network", of: trace))
        }
        let results = LoadRecorder<Int>()

        results.load(sut)
        memory.fail(with: CacheMiss.absent)
        network.fail(with: TestError(id: 1))
        scheduler.advance(by: .seconds(1))
        network.complete(with: 7)

        XCTAssertEqual(results.values, [7])
        XCTAssertEqual(
            events.kinds,
            [
                "started", "stepStarted memory", "stepFailed memory", "stepStarted network",
                "retrying 2 after 1.0 seconds", "stepSucceeded network", "succeeded",
            ])
        XCTAssertEqual(Set(events.all.map(\.load)).count, 1, "one load, one identity")
        XCTAssertEqual(events.all.map(\.label), Array(repeating: "friends", count: 7))
        let elapsed = events.all.map(\.elapsed)
        XCTAssertEqual(elapsed, elapsed.sorted(), "events come in order")
    }

    func test_overlappingLoads_eachKeepTheirOwnIdentity_andACancelIsReported() {
        let events = EventLog()
        let upstream = LoaderSpy<Int>()
        let sut = TracedLoader("item", observer: events.record) { trace in upstream.step("network", of: trace) }
        let results = LoadRecorder<Int>()

        let first = results.load(sut)
        results.load(sut)
        first.cancel()
        upstream.complete(with: 2, at: 1)
        upstream.complete(with: 1, at: 0)

        XCTAssertEqual(results.values, [2], "a cancelled load never completes")
        let byLoad = Dictionary(grouping: events.all, by: \.load)
        XCTAssertEqual(byLoad.count, 2)
        let kinds = byLoad.keys.sorted().map { id in byLoad[id]!.map(EventLog.describe) }
        XCTAssertEqual(kinds.first?.first, "started")
        XCTAssertEqual(kinds.first?.last, "cancelled")
        XCTAssertEqual(kinds.last, ["started", "stepStarted network", "stepSucceeded network", "succeeded"])
    }

    func test_aFailedLoad_reportsTheFailure_andObservingRetriesChains() {
        let events = EventLog()
        let seen = Locked<[Int]>([])
        let upstream = LoaderSpy<Int>()
        let policy = RetryPolicy.immediate(maxAttempts: 2).observingRetries { retry, _, _ in
            seen.withLock { $0.append(retry) }
        }
        let sut = TracedLoader("item", observer: events.record) { trace in
            upstream.retry(policy.reporting(to: trace), scheduler: ImmediateScheduler.immediate)
        }
        let results = LoadRecorder<Int>()

        results.load(sut)
        upstream.fail(with: TestError(id: 1))
        upstream.fail(with: TestError(id: 2))

        XCTAssertEqual(events.kinds, ["started", "retrying 2 after 0.0 seconds", "failed"])
        XCTAssertEqual(seen.withLock { $0 }, [1], "the earlier observer still hears of the retry")
        XCTAssertEqual(results.errors.first as? TestError, TestError(id: 2))
    }

    func test_readmeSample() async throws {
        let memory = InMemoryCache<[String]>()
        let remote = AnyLoader<[String]> { ["Ada"] }
        let printed = Locked<[String]>([])
        @Sendable func print(_ load: UInt64, _ elapsed: Duration, _ kind: LoadEvent.Kind) {
            printed.withLock { $0.append(EventLog.describe(kind)) }
        }

        // Sample: begin
        let log: @Sendable (LoadEvent) -> Void = { event in print(event.load, event.elapsed, event.kind) }
        let friends = TracedLoader("friends", observer: log) { trace in
            memory.step("memory", of: trace)
                .fallback(
                    to: remote.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3).reporting(to: trace))
                        .step("network", of: trace))
        }
        // Sample: end

        let loaded = try await friends.load()
        XCTAssertEqual(loaded, ["Ada"])
        XCTAssertEqual(
            printed.withLock { $0 },
            [
                "started", "stepStarted memory", "stepFailed memory", "stepStarted network", "stepSucceeded network",
                "succeeded",
            ])
    }

    func test_failuresOnly_eachFailedLoadIsToldWithItsIdentity() {
        let upstream = LoaderSpy<Int>()
        let failures = Locked<[LoadEvent]>([])
        let failuresOnly: @Sendable (LoadEvent) -> Void = { event in
            if case .failed = event.kind { failures.withLock { $0.append(event) } }
        }
        let sut = TracedLoader("friends", observer: failuresOnly) { _ in upstream }
        let results = LoadRecorder<Int>()

        results.load(sut)
        results.load(sut)
        results.load(sut)
        upstream.fail(with: TestError(id: 1), at: 0)
        upstream.complete(with: 2, at: 1)
        upstream.fail(with: TestError(id: 3), at: 2)

        let logged = failures.withLock { $0 }
        XCTAssertEqual(logged.count, 2, "failures only")
        XCTAssertEqual(Set(logged.map(\.load)).count, 2, "each failed load with its own identity")
        XCTAssertEqual(logged.map(\.label), ["friends", "friends"])
        XCTAssertEqual(results.values, [2])
    }

    func test_streamRetry_tellsTheRetryObserverToo() {
        let seen = Locked<[Int]>([])
        let attempts = Locked(0)
        let stream = EventStream<Int, any Error>.deferred {
            let attempt = attempts.withLock { attempts -> Int in
                attempts += 1
                return attempts
            }
            return attempt < 3 ? .fail(TestError(id: attempt)) : .just(attempt)
        }
        .retry(
            .immediate(maxAttempts: 3).observingRetries { retry, _, _ in seen.withLock { $0.append(retry) } },
            scheduler: ImmediateScheduler.immediate)

        let recorder = StreamRecorder(stream)

        XCTAssertEqual(recorder.values, [3])
        XCTAssertEqual(seen.withLock { $0 }, [1, 2])
    }
}

/// The events of traced loads, as a test reads them.
private final class EventLog: Sendable {
    private let events = Locked<[LoadEvent]>([])

    var record: @Sendable (LoadEvent) -> Void { { event in self.events.withLock { $0.append(event) } } }
    var all: [LoadEvent] { events.withLock { $0 } }
    var kinds: [String] { all.map(Self.describe) }

    static func describe(_ event: LoadEvent) -> String { describe(event.kind) }

    static func describe(_ kind: LoadEvent.Kind) -> String {
        switch kind {
        case .started: "started"
        case .stepStarted(let name): "stepStarted \(name)"
        case .stepSucceeded(let name, _): "stepSucceeded \(name)"
        case .stepFailed(let name, _, _): "stepFailed \(name)"
        case .retrying(let attempt, let delay, _): "retrying \(attempt) after \(delay)"
        case .succeeded: "succeeded"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }
}
