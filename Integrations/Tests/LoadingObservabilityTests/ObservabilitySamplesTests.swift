import Foundation
import InMemoryTracing
import Loading
import LoadingObservability
import Logging
import MetricsTestKit
import XCTest

/// The adapters' documented samples, compiled and run.
final class ObservabilitySamplesTests: XCTestCase {
    private let upstream = Quotes()

    func test_logging() async throws {
        let upstream = upstream
        // Sample: begin
        let log = StoreEventLog<String>(store: "quotes", logger: Logger(label: "quotes"))
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            events: log.record)
        // Sample: end
        let quote = try await store.read("ACME").load()
        XCTAssertEqual(quote.value, 100)
    }

    func test_metrics() async throws {
        let upstream = upstream
        // Sample: begin
        let metrics = StoreEventMetrics<String>(store: "quotes")
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            events: metrics.record)
        // Sample: end
        let quote = try await store.read("ACME").load()
        XCTAssertEqual(quote.value, 100)
    }

    func test_tracing() async throws {
        let upstream = upstream
        // Sample: begin
        let tracing = StoreEventTracing<String>(store: "quotes")
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            events: tracing.record)
        // Sample: end
        let quote = try await store.read("ACME").load()
        XCTAssertEqual(quote.value, 100)
    }
}

/// A quotes upstream answering at once.
private struct Quotes: Sendable {
    func quote(_ symbol: String) -> AnyLoader<Double> {
        AnyLoader { completion in
            completion(.success(100))
            return PendingLoad<Double> { _ in }
        }
    }
}
