import Foundation
import Loading
import LoadingPostgres
import Logging
import PostgresNIO
import XCTest

/// A PostgreSQL level against a real server: the URL in `LOADING_POSTGRES_URL` (`.ci/run` starts one on loopback and
/// sets it). Each test works in a table of its own, dropped at the end.
final class PostgresLevelTests: XCTestCase {
    private var client: PostgresClient!
    private var table = ""

    override func setUp() async throws {
        client = try XCTUnwrap(Self.makeClient(), "LOADING_POSTGRES_URL names no PostgreSQL server")
        let running = Task { [client] in await client!.run() }
        addTeardownBlock { running.cancel() }
        table = "level_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let (client, table) = (client!, table)
        addTeardownBlock { _ = try? await client.query("DROP TABLE IF EXISTS \(unescaped: table)") }
    }

    // MARK: The level

    func test_aSavedValue_isReadBackWithItsDate_andRemoved() async throws {
        let level = try PostgresLevel<String, Quote>(client: client, table: table)
        let savedAt = Date(timeIntervalSince1970: 1_700_000_000.25)

        try await level.save(Quote(symbol: "ACME", price: 12.5), for: "ACME", savedAt: savedAt)
        let read = try await level.value(for: "ACME")

        XCTAssertEqual(read?.value, Quote(symbol: "ACME", price: 12.5))
        XCTAssertEqual(read?.savedAt.timeIntervalSince1970 ?? 0, savedAt.timeIntervalSince1970, accuracy: 0.000_01)
        try await level.removeValue(for: "ACME")
        let afterRemoval = try await level.value(for: "ACME")
        XCTAssertNil(afterRemoval)
    }

    func test_aSave_replacesTheRow_andRemoveAll_emptiesTheTable() async throws {
        let level = try PostgresLevel<String, Quote>(client: client, table: table)
        try await level.save(Quote(symbol: "A", price: 1), for: "A", savedAt: Date())
        try await level.save(Quote(symbol: "A", price: 2), for: "A", savedAt: Date())
        try await level.save(Quote(symbol: "B", price: 3), for: "B", savedAt: Date())

        let replaced = try await level.value(for: "A")
        XCTAssertEqual(replaced?.value.price, 2)
        try await level.removeAll()
        let rows = try await count()
        XCTAssertEqual(rows, 0)
    }

    func test_rowsPastTheirAge_leaveTheTableAsItIsUsed_aBoundedBatchAtATime() async throws {
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let clock = Locked(start)
        let level = try levelAging(by: clock)
        try await level.save(Quote(symbol: "A", price: 1), for: "A", savedAt: start)  // makes the table
        // 600 rows an hour old: keys no instance asks for any more.
        try await client.query(
            """
            INSERT INTO \(unescaped: table) (key, value, saved_at)
            SELECT 'old' || g, '{"symbol":"OLD","price":0}'::jsonb, \(start.addingTimeInterval(-3_600))
            FROM generate_series(1, 600) g
            """)

        clock.withLock { $0 = start.addingTimeInterval(30) }
        try await level.save(Quote(symbol: "B", price: 2), for: "B", savedAt: start.addingTimeInterval(30))
        let beforeTheNextSweep = try await count()
        clock.withLock { $0 = start.addingTimeInterval(61) }
        try await level.save(Quote(symbol: "C", price: 3), for: "C", savedAt: start.addingTimeInterval(61))
        let afterOneSweep = try await count()
        clock.withLock { $0 = start.addingTimeInterval(122) }
        try await level.save(Quote(symbol: "D", price: 4), for: "D", savedAt: start.addingTimeInterval(122))
        let afterTwo = try await count()

        XCTAssertEqual(beforeTheNextSweep, 602, "a sweep at most once every maxAge")
        XCTAssertEqual(afterOneSweep, 103, "a sweep deletes 500 rows past their age at most, the oldest first")
        XCTAssertEqual(afterTwo, 1, "the rest past their age (A, B and C among them) went with the next")
        let served = try await level.value(for: "D")
        XCTAssertEqual(served?.value.price, 4)
    }

    func test_aSweep_neverDeletesARowAnotherInstanceSavedAgainMeanwhile() async throws {
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let clock = Locked(start)
        let level = try levelAging(by: clock)
        try await level.save(Quote(symbol: "HOT", price: 1), for: "HOT", savedAt: start)  // the first sweep
        clock.withLock { $0 = start.addingTimeInterval(61) }  // HOT's row is past its age: the next sweep's

        // Another instance saves HOT again; its transaction has not committed when this instance's sweep begins.
        let savedAgain = try await HeldTransaction(
            """
            UPDATE \(unescaped: table) SET value = '{"symbol":"HOT","price":2}'::jsonb,
                saved_at = \(start.addingTimeInterval(61)) WHERE key = '"HOT"'
            """, on: client)
        let save = Task { [level] in
            try await level.save(Quote(symbol: "B", price: 3), for: "B", savedAt: start.addingTimeInterval(61))
        }
        let blocked = try await HeldTransaction.untilASessionWaitsForALock(on: client)
        XCTAssertTrue(blocked, "the sweep waits for the other instance's row")
        try await savedAgain.commit()
        try await save.value

        let hot = try await level.value(for: "HOT")
        XCTAssertEqual(hot?.value.price, 2, "the row saved again is young: the sweep leaves it")
    }

    func test_aValueOlderThanMaxAge_isNotServed() async throws {
        let clock = Locked(Date(timeIntervalSince1970: 1_700_000_000))
        let level = try levelAging(by: clock)
        try await level.save(Quote(symbol: "A", price: 1), for: "A", savedAt: clock.withLock { $0 })

        clock.withLock { $0 += 59 }
        let young = try await level.value(for: "A")
        clock.withLock { $0 += 2 }
        let old = try await level.value(for: "A")

        XCTAssertNotNil(young)
        XCTAssertNil(old, "61 s old, by the level's clock")
    }

    func test_keysOfAnyCodableType_andValuesAreQueryableJSON() async throws {
        let level = try PostgresLevel<QuoteKey, Quote>(client: client, table: table)
        try await level.save(Quote(symbol: "A", price: 7), for: QuoteKey(market: "NYSE", symbol: "A"), savedAt: Date())

        let read = try await level.value(for: QuoteKey(market: "NYSE", symbol: "A"))
        let other = try await level.value(for: QuoteKey(market: "LSE", symbol: "A"))
        let rows = try await client.query("SELECT value->>'price' FROM \(unescaped: table)")
        var prices: [String] = []
        for try await price in rows.decode(String.self) { prices.append(price) }

        XCTAssertEqual(read?.value.price, 7)
        XCTAssertNil(other)
        XCTAssertEqual(prices, ["7"])
    }

    func test_aRowThatNoLongerDecodes_failsTheRead_andTheStoreFetches() async throws {
        let level = try PostgresLevel<String, Quote>(client: client, table: table)
        try await level.save(Quote(symbol: "A", price: 1), for: "A", savedAt: Date())
        try await client.query(
            "UPDATE \(unescaped: table) SET value = '{\"unexpected\": true}'::jsonb")

        do {
            _ = try await level.value(for: "A")
            XCTFail("an undecodable row is an error")
        } catch let error as PostgresLevelError {
            XCTAssertTrue(error.localizedDescription.hasPrefix("The value of the key \"A\" in the PostgreSQL table"))
        }
        let store = Store(
            levels: [.cache(level, name: "postgres")],
            fetch: LoaderFamily { (symbol: String) in Fresh(Quote(symbol: symbol, price: 2)) })
        let response = try await store.read("A").load()
        XCTAssertEqual(response.value?.price, 2)
        XCTAssertEqual(response.origin, .network)
    }

    func test_aBadTableName_isRefusedWithASentence() {
        XCTAssertThrowsError(try PostgresLevel<String, Quote>(client: client, table: "quotes; DROP TABLE x")) {
            XCTAssertEqual(
                $0.localizedDescription,
                "“quotes; DROP TABLE x” cannot name a PostgreSQL level's table: use lowercase letters, digits and "
                    + "underscores, starting with a letter or an underscore (at most 63).")
        }
    }

    // MARK: Stores over one table (instances)

    func test_twoStoresOverOneTable_fetchOnce_andTheSecondServesTheFirstsValueWithItsAge() async throws {
        let upstream = CountingUpstream()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let clock = Locked(start)
        func instance() throws -> Store<String, Quote> {
            Store(
                levels: [
                    .cache(MemoryCache(), name: "memory"),
                    .cache(
                        try PostgresLevel<String, Quote>(client: client, table: table, now: { clock.withLock { $0 } }),
                        name: "postgres", timeout: .seconds(60)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                keptValues: 0,  // each read asks the levels: the second one is served by the memory level
                now: { clock.withLock { $0 } })
        }
        let (first, second) = (try instance(), try instance())

        let fetched = try await first.read("ACME").load()
        clock.withLock { $0 += 2.5 }
        let shared = try await second.read("ACME").load()
        let again = try await second.read("ACME").load()

        XCTAssertEqual(fetched.origin, .network)
        XCTAssertEqual(shared.origin, .cache("postgres"))
        XCTAssertEqual(shared.value, fetched.value)
        XCTAssertEqual(upstream.calls, 1, "the second instance did not call upstream")
        XCTAssertEqual(again.savedAt?.timeIntervalSince1970 ?? 0, start.timeIntervalSince1970, accuracy: 0.000_01)
        XCTAssertEqual(again.origin, .cache("memory"))
        XCTAssertEqual(again.age(at: clock.withLock { $0 }), .milliseconds(2_500), "2.5 s old in memory too")
    }

    func test_aClearOfOneStore_emptiesTheTableForEveryInstance() async throws {
        let level = try PostgresLevel<String, Quote>(client: client, table: table)
        let store = Store(
            levels: [.cache(level, name: "postgres")],
            fetch: LoaderFamily { (symbol: String) in Fresh(Quote(symbol: symbol, price: 1)) })
        _ = try await store.read("A").load()
        _ = try await store.read("B").load()

        await withCheckedContinuation { done in store.clear { done.resume() } }

        let rows = try await count()
        XCTAssertEqual(rows, 0)
    }

    func test_aDatabaseThatDoesNotAnswer_fallsThroughWithinTheTimeout() async throws {
        // A client nobody runs never gets a connection: every query waits, as against a stopped database.
        let stalled = try XCTUnwrap(Self.makeClient())
        let level = try PostgresLevel<String, Quote>(client: stalled, table: table)
        let store = Store(
            levels: [.cache(level, name: "postgres", timeout: .milliseconds(200))],
            fetch: LoaderFamily { (symbol: String) in Fresh(Quote(symbol: symbol, price: 1)) })

        let started = ContinuousClock.now
        let response = try await store.read("A").load()
        let waited = ContinuousClock.now - started

        XCTAssertEqual(response.origin, .network, "the level gave up after its timeout, then the fetch answered")
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(200), "not before the timeout")
    }

    func test_manyInstancesCreatingTheTableAtOnce_allWork() async throws {
        let levels = try (0..<8).map { _ in try PostgresLevel<String, Quote>(client: client, table: table) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, level) in levels.enumerated() {
                group.addTask {
                    try await level.save(Quote(symbol: "S\(index)", price: 1), for: "S\(index)", savedAt: Date())
                }
            }
            try await group.waitForAll()
        }
        let rows = try await count()
        XCTAssertEqual(rows, 8)
    }

    func test_theDocumentedStore_readsThroughItsPostgresLevel() async throws {
        let client: PostgresClient = client
        let upstream = CountingUpstream()
        _ = try await client.query("DROP TABLE IF EXISTS quotes")
        addTeardownBlock { _ = try? await client.query("DROP TABLE IF EXISTS quotes") }
        // Sample: begin
        let quotesTable = try PostgresLevel<String, Quote>(client: client, table: "quotes", maxAge: .seconds(60))
        let store = Store(
            levels: [
                .cache(MemoryCache(countLimit: 10_000), name: "memory"),
                .cache(quotesTable, name: "postgres", timeout: .milliseconds(200)),
            ],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) })
        // Sample: end

        // The table made and a connection open: the sample's save is one query.
        _ = try await quotesTable.value(for: "warm")
        _ = try await store.read("ACME").load()
        var saved = try await quotesTable.value(for: "ACME")
        let deadline = ContinuousClock.now + .seconds(60)  // a watchdog: a save may still land after its timeout
        while saved == nil, ContinuousClock.now < deadline {
            await Task.yield()
            saved = try await quotesTable.value(for: "ACME")
        }
        XCTAssertEqual(saved?.value.symbol, "ACME")
    }

    // MARK: - Helpers

    private func count() async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM \(unescaped: table)")
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// A level of this test's table whose values are served for 60 seconds, by `clock`.
    private func levelAging(by clock: Locked<Date>) throws -> PostgresLevel<String, Quote> {
        try PostgresLevel(client: client, table: table, maxAge: .seconds(60), now: { clock.withLock { $0 } })
    }

    /// A client for `LOADING_POSTGRES_URL` (`postgres://user@host:port/database`).
    static func makeClient() -> PostgresClient? {
        serverURL().map { makeClient(host: $0.host, port: $0.port) }
    }

    /// A client for the database of `LOADING_POSTGRES_URL`, reached at `host`:`port` (a proxy in front of it).
    static func makeClient(host: String, port: Int) -> PostgresClient {
        let url = URLComponents(string: ProcessInfo.processInfo.environment["LOADING_POSTGRES_URL"] ?? "")
        let configuration = PostgresClient.Configuration(
            host: host, port: port, username: url?.user ?? "postgres", password: url?.password,
            database: String(url?.path.dropFirst() ?? ""), tls: .disable)
        var logger = Logger(label: "LoadingPostgresTests")
        logger.logLevel = .critical  // a client nobody runs, or behind a faulty proxy, logs its failed connections
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    /// The server's host and port in `LOADING_POSTGRES_URL`, when it names one.
    static func serverURL() -> (host: String, port: Int)? {
        guard let text = ProcessInfo.processInfo.environment["LOADING_POSTGRES_URL"],
            let url = URLComponents(string: text), let host = url.host
        else { return nil }
        return (host, url.port ?? 5432)
    }
}

struct Quote: Codable, Sendable, Equatable {
    let symbol: String
    let price: Double
}

struct QuoteKey: Codable, Hashable, Sendable {
    let market: String
    let symbol: String
}

/// An upstream answering at once, counting its calls.
final class CountingUpstream: Sendable {
    private let count = Locked(0)

    var calls: Int { count.withLock { $0 } }

    func quote(_ symbol: String) -> Fresh<Quote> {
        count.withLock { $0 += 1 }
        return Fresh(Quote(symbol: symbol, price: 100))
    }
}

/// A loader that answers its value at once.
struct Fresh<Output: Sendable>: Loader {
    let value: Output
    init(_ value: Output) { self.value = value }
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        completion(.success(value))
        return Done()
    }
}

/// A token with nothing to cancel.
struct Done: CancellationToken {
    func cancel() {}
}
