import Foundation
import InMemoryTracing
import Loading
import LoadingObservability
import LoadingTestSupport
import Logging
import MetricsTestKit
import Tracing
import XCTest

/// A real store's events through the logging, metrics and tracing adapters: a level that fails, a fetch joined by
/// other callers, a failed fetch.
final class StoreObservabilityTests: XCTestCase {
    func test_metrics_countLevelReadsByOutcome_fetchesJoinsAndWriteFailures() throws {
        let metrics = TestMetrics()
        let counted = StoreEventMetrics<String>(store: "quotes", factory: metrics)
        let upstream = HeldQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, Double>(), name: "memory"), .cache(BrokenDisk(), name: "disk")],
            fetch: LoaderFamily { (_: String) in upstream },
            events: counted.record)

        let answered = DispatchGroup()
        for _ in 0..<3 {
            answered.enter()
            store.read("ACME").load { _ in answered.leave() }
        }
        upstream.answerAll(with: 12.5)
        XCTAssertEqual(answered.wait(timeout: .now() + 5), .success)

        let reads: (String, String) -> Int64 = { level, outcome in
            (try? metrics.expectCounter(
                "loading_level_reads_total", [("store", "quotes"), ("level", level), ("outcome", outcome)]))?
                .totalValue ?? 0
        }
        XCTAssertEqual(reads("memory", "miss"), 3)
        XCTAssertEqual(reads("disk", "failed"), 3)
        XCTAssertEqual(try metrics.expectCounter("loading_fetch_joins_total", [("store", "quotes")]).totalValue, 2)
        XCTAssertEqual(
            try metrics.expectCounter("loading_fetches_total", [("store", "quotes"), ("outcome", "success")])
                .totalValue, 1)
        XCTAssertEqual(
            try metrics.expectCounter(
                "loading_level_write_failures_total", [("store", "quotes"), ("level", "disk"), ("operation", "save")]
            ).totalValue, 1)
        XCTAssertEqual(try metrics.expectTimer("loading_fetch_duration_seconds", [("store", "quotes")]).values.count, 1)
    }

    func test_tracing_aSpanPerFetch_childOfTheRequestThatStartedIt_linkedFromTheRequestsThatJoined() throws {
        let tracer = InMemoryTracer()
        let traced = StoreEventTracing<String>(store: "quotes", tracer: tracer)
        let upstream = HeldQuotes()
        let store = Store(levels: [], fetch: LoaderFamily { (_: String) in upstream }, events: traced.record)

        let first = tracer.startAnySpan("request 1", context: .topLevel)
        let second = tracer.startAnySpan("request 2", context: .topLevel)
        let answered = DispatchGroup()
        for request in [first, second] {
            answered.enter()
            ServiceContext.withValue(request.context) {
                _ = store.read("ACME").load { _ in answered.leave() }
            }
        }
        upstream.answerAll(with: 12.5)
        XCTAssertEqual(answered.wait(timeout: .now() + 5), .success)
        _ = store.read("INIT", policy: .networkOnly).load { _ in }
        upstream.failAll()

        let fetches = tracer.finishedSpans.filter { $0.operationName == "loading.fetch" }
        XCTAssertEqual(fetches.count, 2)
        let shared = try XCTUnwrap(fetches.first { $0.attributes["loading.key"]?.toSpanAttribute() == "ACME" })
        XCTAssertEqual(shared.spanContext.parentSpanID, first.context.inMemorySpanContext?.spanID)
        XCTAssertEqual(shared.links.count, 1, "the second request joined")
        XCTAssertEqual(
            shared.links.first?.context.inMemorySpanContext?.spanID, second.context.inMemorySpanContext?.spanID)
        let failed = try XCTUnwrap(fetches.first { $0.attributes["loading.key"]?.toSpanAttribute() == "INIT" })
        XCTAssertEqual(failed.errors.count, 1)
    }

    func test_logging_warnsOfFailuresWithTheKeyAndTheLevel() {
        let (log, lines) = debugLog()
        let upstream = HeldQuotes()
        let store = Store(
            levels: [.cache(BrokenDisk(), name: "disk")], fetch: LoaderFamily { (_: String) in upstream },
            events: log.record)

        let answered = expectation(description: "answered")
        store.read("ACME").load { _ in answered.fulfill() }
        upstream.failAll()
        wait(for: [answered], timeout: 5)

        let logged = lines.withLock { $0 }
        XCTAssertTrue(
            logged.contains {
                $0.hasPrefix("warning level read failed: counted as a miss") && $0.contains("key=ACME")
                    && $0.contains("level=disk")
            }, "\(logged)")
        XCTAssertTrue(logged.contains { $0.hasPrefix("debug fetch started") })
        XCTAssertTrue(logged.contains { $0.hasPrefix("warning fetch failed") && $0.contains("duration=") })
    }

    func test_aCoordinatedFetch_isCounted_logged_andAChildSpanOfItsFetch() throws {
        let metrics = TestMetrics()
        let counted = StoreEventMetrics<String>(store: "quotes", factory: metrics)
        let tracer = InMemoryTracer()
        let traced = StoreEventTracing<String>(store: "quotes", tracer: tracer)
        let (log, lines) = debugLog()
        let upstream = HeldQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, Double>(), name: "shared")],
            fetch: LoaderFamily { (_: String) in upstream },
            coordination: .lease(UnreachableLease(), sharedLevel: "shared"),
            events: { event in
                counted.record(event)
                traced.record(event)
                log.record(event)
            })

        let fetching = expectation(description: "fetching")
        upstream.onLoad { fetching.fulfill() }
        let answered = expectation(description: "answered")
        store.read("ACME").load { _ in answered.fulfill() }
        wait(for: [fetching], timeout: 60)
        upstream.answerAll(with: 12.5)
        wait(for: [answered], timeout: 60)

        XCTAssertEqual(
            try metrics.expectCounter(
                "loading_fetch_coordinations_total", [("store", "quotes"), ("outcome", "unreachable")]
            ).totalValue, 1)
        XCTAssertEqual(
            try metrics.expectTimer("loading_fetch_coordination_duration_seconds", [("store", "quotes")]).values
                .count, 1)
        let fetch = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "loading.fetch" })
        let lease = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "loading.lease" })
        XCTAssertEqual(lease.spanContext.parentSpanID, fetch.spanContext.spanID, "a child of the fetch's span")
        XCTAssertEqual(lease.attributes["loading.outcome"]?.toSpanAttribute(), "unreachable")
        XCTAssertTrue(
            lines.withLock { $0 }.contains { $0.hasPrefix("warning lease unreachable") && $0.contains("key=ACME") })
    }

    func test_levelOperationsAndUpstreamCalls_areTimed_andTracedAsSpans() throws {
        let metrics = TestMetrics()
        let counted = StoreEventMetrics<String>(store: "quotes", factory: metrics)
        let tracer = InMemoryTracer()
        let traced = StoreEventTracing<String>(store: "quotes", tracer: tracer)
        let upstream = HeldQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, Double>(), name: "memory"), .cache(BrokenDisk(), name: "disk")],
            fetch: LoaderFamily { (_: String) in upstream },
            events: { event in
                counted.record(event)
                traced.record(event)
            })

        let request = tracer.startAnySpan("request", context: .topLevel)
        let answered = expectation(description: "answered")
        ServiceContext.withValue(request.context) {
            _ = store.read("ACME").load { _ in answered.fulfill() }
        }
        upstream.answerAll(with: 12.5)
        wait(for: [answered], timeout: 60)

        for (level, operation) in [("memory", "read"), ("disk", "read"), ("memory", "save"), ("disk", "save")] {
            XCTAssertEqual(
                try metrics.expectTimer(
                    "loading_level_operation_duration_seconds",
                    [("store", "quotes"), ("level", level), ("operation", operation)]
                ).values.count, 1, "\(level) \(operation)")
        }
        XCTAssertEqual(
            try metrics.expectTimer("loading_upstream_duration_seconds", [("store", "quotes")]).values.count, 1)
        let fetch = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "loading.fetch" })
        let call = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "loading.upstream" })
        XCTAssertEqual(
            call.spanContext.parentSpanID, fetch.spanContext.spanID, "the upstream call is the fetch's child")
        let reads = tracer.finishedSpans.filter {
            $0.operationName == "loading.level" && $0.attributes["loading.operation"]?.toSpanAttribute() == "read"
        }
        XCTAssertEqual(
            reads.map { $0.attributes["loading.level"]?.toSpanAttribute() }, ["memory", "disk"],
            "the reads before the fetch, in the request's trace")
        XCTAssertEqual(Set(reads.map(\.spanContext.parentSpanID)), [request.context.inMemorySpanContext?.spanID])
        XCTAssertEqual(reads.last?.errors.count, 1, "the disk's failure recorded")
    }

    func test_aSharedLevelReadWhileWaitingForTheLeasesHolder_isAChildSpanOfTheFetch() throws {
        let tracer = InMemoryTracer()
        let traced = StoreEventTracing<String>(store: "quotes", tracer: tracer)
        let shared = MemoryCache<String, Double>()
        let lease = HeldLease()
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (_: String) in HeldQuotes() },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .seconds(120), polling: .milliseconds(5)),
            events: traced.record)

        let answered = expectation(description: "answered")
        _ = store.read("ACME").load { _ in answered.fulfill() }
        let waited = eventually {
            tracer.finishedSpans.contains {
                $0.operationName == "loading.level" && $0.attributes["loading.level"]?.toSpanAttribute() == "shared"
                    && $0.spanContext.parentSpanID != nil
            }
        }
        shared.save(12.5, for: "ACME") { _ in }  // the holder's value arrives
        wait(for: [answered], timeout: 60)

        XCTAssertTrue(waited, "a look at the shared level while waiting")
        let fetch = try XCTUnwrap(tracer.finishedSpans.first { $0.operationName == "loading.fetch" })
        let looks = tracer.finishedSpans.filter {
            $0.operationName == "loading.level" && $0.spanContext.parentSpanID == fetch.spanContext.spanID
        }
        XCTAssertFalse(looks.isEmpty)
    }

    /// A log of the store "quotes" from `debug` up, and the lines it wrote.
    private func debugLog() -> (StoreEventLog<String>, Locked<[String]>) {
        let lines = Locked<[String]>([])
        var logger = Logger(label: "quotes") { _ in LineHandler(lines: lines) }
        logger.logLevel = .debug
        return (StoreEventLog<String>(store: "quotes", logger: logger), lines)
    }
}

/// A lease whose database cannot be reached.
private struct UnreachableLease: FetchLease {
    func acquire(_ key: String, for duration: Duration) async throws -> Bool { throw URLError(.cannotConnectToHost) }
    func release(_ key: String) async throws { throw URLError(.cannotConnectToHost) }
}

/// A lease another instance holds for ever.
private struct HeldLease: FetchLease {
    func acquire(_ key: String, for duration: Duration) async throws -> Bool { false }
    func release(_ key: String) async throws {}
}

/// A log handler that keeps each line as "level message key=value...".
private struct LineHandler: LogHandler {
    let lines: Locked<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let fields = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        lines.withLock {
            $0.append(([event.level.rawValue, event.message.description] + fields).joined(separator: " "))
        }
    }
}

/// A disk level whose every operation fails.
private struct BrokenDisk: KeyedCache {
    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<Double>, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileReadCorruptFile)))
    }
    func save(_ value: Double, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteOutOfSpace)))
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteNoPermission)))
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteNoPermission)))
    }
}

/// An upstream holding its loads until told.
private final class HeldQuotes: Loader, Sendable {
    private let waiting = Locked<[LoadCompletion<Double>]>([])
    private let loaded = Locked<(@Sendable () -> Void)?>(nil)

    func load(completion: @escaping LoadCompletion<Double>) -> any CancellationToken {
        waiting.withLock { $0.append(completion) }
        loaded.withLock { $0 }?()
        return Ignored()
    }

    /// Runs `body` at each load, from now on.
    func onLoad(_ body: @escaping @Sendable () -> Void) {
        loaded.withLock { $0 = body }
    }

    func answerAll(with price: Double) {
        for completion in waiting.withLock({ exchange(&$0, with: []) }) { completion(.success(price)) }
    }

    func failAll() {
        for completion in waiting.withLock({ exchange(&$0, with: []) }) {
            completion(.failure(URLError(.badServerResponse)))
        }
    }
}

/// A token with nothing to cancel.
private struct Ignored: CancellationToken {
    func cancel() {}
}
