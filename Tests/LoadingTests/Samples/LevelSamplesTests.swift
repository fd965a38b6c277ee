import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The samples of `AsyncKeyedCache`, `StoreLevel`'s timeouts and the store article's section on levels, compiled
/// and run.
struct Quote: Codable, Sendable, Equatable {
    let symbol: String
    let price: Double
}

/// A quotes API answering at once, counting its calls.
struct QuoteServer: Sendable {
    let calls = Locked(0)

    func quote(_ symbol: String) -> AnyLoader<Quote> {
        let calls = calls
        return AnyLoader { completion in
            calls.withLock { $0 += 1 }
            completion(.success(Quote(symbol: symbol, price: 100)))
            return PendingLoad<Quote> { _ in }
        }
    }
}

/// A quotes API that fails with the errors given, in order, then answers.
final class FlakyQuotes: Sendable {
    private let state: Locked<(failures: [any Error], attempts: Int)>

    init(failures: [any Error]) {
        state = Locked((failures, 0))
    }

    var attempts: Int { state.withLock { $0.attempts } }

    func quote(_ symbol: String) -> AnyLoader<Quote> {
        AnyLoader { [state] completion in
            let failure = state.withLock { state -> (any Error)? in
                state.attempts += 1
                return state.failures.isEmpty ? nil : state.failures.removeFirst()
            }
            completion(failure.map { .failure($0) } ?? .success(Quote(symbol: symbol, price: 100)))
            return PendingLoad<Quote> { _ in }
        }
    }
}

/// The upstream does not know the symbol: a failure that lasts.
struct UnknownSymbol: Error, Equatable {}

/// Fetch leases of a service's instances, kept in memory.
actor InstanceLeases: FetchLease {
    private var held: Set<String> = []

    func acquire(_ key: String, for duration: Duration) async throws -> Bool { held.insert(key).inserted }
    func release(_ key: String) async throws { held.remove(key) }
}

// Sample: begin
actor QuoteTable: AsyncKeyedCache {
    private var rows: [String: CachedValue<Quote>] = [:]

    func value(for key: String) async throws -> CachedValue<Quote>? { rows[key] }
    func save(_ value: Quote, for key: String, savedAt: Date) async throws {
        rows[key] = CachedValue(value, savedAt: savedAt)
    }
    func removeValue(for key: String) async throws { rows[key] = nil }
    func removeAll() async throws { rows = [:] }
}
// Sample: end

final class LevelSamplesTests: XCTestCase {
    func test_aStoreWithASharedLevelGivenATimeout() async throws {
        let api = QuoteServer()
        let memory = MemoryCache<String, Quote>()
        let sharedCache = MemoryCache<String, Quote>()
        // Sample: begin
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(sharedCache, name: "shared", timeout: .milliseconds(200))],
            fetch: LoaderFamily { (id: String) in api.quote(id) })
        // Sample: end

        let quote = try await store.read("ACME").load()
        XCTAssertEqual(quote.value, Quote(symbol: "ACME", price: 100))
        let saved = await eventuallyAsync { (try? await sharedCache.value(for: "ACME"))?.value == quote.value }
        XCTAssertTrue(saved, "saved to the shared level")
    }

    func test_aStoreOverAnAsyncTable() async throws {
        let api = QuoteServer()
        let table = QuoteTable()
        // Sample: begin
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory"), .cache(table, name: "table", timeout: .milliseconds(200))],
            fetch: LoaderFamily { (id: String) in api.quote(id) })
        // Sample: end

        _ = try await store.read("ACME").load()
        let isSaved = await eventuallyAsync { (try? await table.value(for: "ACME")) != nil }
        XCTAssertTrue(isSaved, "the first store saved the quote to the table")
        let other = Store(levels: [.cache(table, name: "table")], fetch: LoaderFamily { (id: String) in api.quote(id) })
        let answer = try await other.read("ACME", policy: .cacheFirst).load()
        XCTAssertEqual(answer.origin, .cache("table"), "another store reads it there")
    }

    func test_aStoreTellingItsFetches() async throws {
        let api = QuoteServer()
        // Sample: begin
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.quote(id) },
            events: { event in
                if case .fetchEnded(let key, _, let duration, let error) = event {
                    print("fetched \(key) in \(duration)", error.map { "failed: \($0)" } ?? "")
                }
            })
        // Sample: end

        _ = try await store.read("ACME").load()
        XCTAssertEqual(api.calls.withLock { $0 }, 1)
    }

    func test_aStoreWhoseFetchesHaveAContextOfTheirOwn() async throws {
        let api = QuoteServer()
        // Sample: begin
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.quote(id) },
            fetchContext: .custom { start in
                RequestContext.$id.withValue("fetch") { start() }  // a context of the fetch's own
            })
        // Sample: end

        let quote = try await RequestContext.$id.withValue("request 1") { try await store.read("ACME").load() }
        XCTAssertEqual(quote.value?.symbol, "ACME")
    }

    func test_aCoalescedFamilyCountingItsJoins() async throws {
        let api = QuoteServer()
        let joins = Locked(0)
        // Sample: begin
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .coalesced(events: { event in
                if case .fetchJoined = event { joins.withLock { $0 += 1 } }
            })
        // Sample: end

        _ = try await quotes["ACME"].load()
        XCTAssertEqual(joins.withLock { $0 }, 0, "one caller: nothing to join")
    }

    // MARK: On a server

    func test_aServersStore_boundsWhatItHolds() async throws {
        let upstream = QuoteServer()
        // Sample: begin
        let quotes = Store(
            levels: [.cache(MemoryCache(countLimit: 50_000), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            keptValues: 5_000,
            maxAge: .seconds(30))
        // Sample: end

        _ = try await quotes.read("ACME").load()
        let again = try await quotes.read("ACME").load()
        XCTAssertEqual(again.origin, .network, "the kept value, fetched once")
        XCTAssertEqual(upstream.calls.withLock { $0 }, 1)
    }

    func test_aServersStore_judgesAgesWithAClockThatOnlyMovesForward() async throws {
        let upstream = QuoteServer()
        // Sample: begin
        let startDate = Date()
        let startInstant = ContinuousClock.now
        let monotonic: @Sendable () -> Date = {
            startDate.addingTimeInterval((ContinuousClock.now - startInstant) / .seconds(1))
        }
        let store = Store(
            levels: [.cache(MemoryCache(expiry: .maxAge(.seconds(30)), now: monotonic), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            now: monotonic)
        // Sample: end

        let first = try await store.read("ACME").load()
        let savedAt = try XCTUnwrap(first.savedAt)
        XCTAssertGreaterThanOrEqual(savedAt, startDate, "stamped by the clock, which started then")
        XCTAssertLessThanOrEqual(savedAt, monotonic(), "and only moves forward")
        XCTAssertLessThanOrEqual(monotonic(), monotonic())
    }

    func test_aServersFetch_retriesOnlyTimeouts() async throws {
        let upstream = FlakyQuotes(failures: [TimeoutError(interval: .seconds(2)), URLError(.badServerResponse)])
        // Sample: begin
        let upstreamFetch = LoaderFamily { (symbol: String) in
            upstream.quote(symbol)
                .timeout(after: .seconds(2))
                .retry(
                    .exponential(initial: .milliseconds(100), jitter: 0.5, maxAttempts: 3)
                        .retrying(if: { $0 is TimeoutError }))
        }
        // Sample: end

        do {
            _ = try await upstreamFetch["ACME"].load()
            XCTFail("the second failure is not retried")
        } catch {
            XCTAssertEqual((error as? URLError)?.code, .badServerResponse)
        }
        XCTAssertEqual(upstream.attempts, 2, "the timeout was retried once, the bad response not")
    }

    func test_twoInstancesCoordinatedByALease_fetchOnce() async throws {
        let upstream = QuoteServer()
        let sharedTable = MemoryCache<String, Quote>()
        let quoteLeases = InstanceLeases()
        func instance() -> Store<String, Quote> {
            // Sample: begin
            let store = Store(
                levels: [
                    .cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared", timeout: .seconds(1)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                coordination: .lease(quoteLeases, sharedLevel: "shared"))
            // Sample: end
            return store
        }

        let (first, second) = (instance(), instance())
        _ = try await first.read("ACME").load()
        let shared = try await second.read("ACME").load()
        XCTAssertEqual(shared.origin, .cache("shared"))
        XCTAssertEqual(upstream.calls.withLock { $0 }, 1)
    }

    func test_twoInstancesSharingTheirFailures_askForAnUnknownSymbolOnce() async throws {
        let upstream = FlakyQuotes(failures: [UnknownSymbol()])
        let sharedTable = MemoryCache<String, Quote>()
        let quoteLeases = MemoryLease()
        func instance() -> Store<String, Quote> {
            // Sample: begin
            let store = Store(
                levels: [
                    .cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared", timeout: .seconds(1)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                coordination: .lease(
                    quoteLeases, sharedLevel: "shared", waiting: .seconds(10),
                    failures: FetchFailureSharing(
                        for: .seconds(5), describe: { $0 is UnknownSymbol ? "unknown symbol" : nil },
                        restore: { _ in UnknownSymbol() })))
            // Sample: end
            return store
        }

        let (first, second) = (instance(), instance())
        let failed = try? await first.read("NOPE").load()
        let left = await eventually { quoteLeases.log.last?.hasPrefix("left") == true }
        do {
            _ = try await second.read("NOPE").load()
            XCTFail("the failure left on the lease answers the second instance")
        } catch {
            XCTAssertTrue(error is UnknownSymbol, "\(error)")
        }

        XCTAssertNil(failed)
        XCTAssertTrue(left, "the failure was left on the lease")
        XCTAssertEqual(upstream.attempts, 1, "the second instance did not ask")
    }

    func test_theArticlesStoreWithADatabaseLevel() async throws {
        let api = QuoteServer()
        let table = QuoteTable()
        // Sample: begin
        let store = Store(
            levels: [
                .cache(MemoryCache(), name: "memory"), .cache(table, name: "database", timeout: .milliseconds(200)),
            ],
            fetch: LoaderFamily { (id: String) in api.quote(id) })
        // Sample: end

        let first = try await store.read("ACME").load()
        let again = try await store.read("ACME").load()
        XCTAssertEqual(first.origin, .network)
        XCTAssertEqual(again.value, first.value)
        XCTAssertEqual(api.calls.withLock { $0 }, 1)
    }
}
