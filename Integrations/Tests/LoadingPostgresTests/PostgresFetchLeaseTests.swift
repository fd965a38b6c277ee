import Foundation
import Loading
import LoadingPostgres
import PostgresNIO
import XCTest

/// A fetch lease in a real PostgreSQL table, and stores standing for two instances of a service that share a level
/// and a lease: one upstream call per cold key, under a stampede.
final class PostgresFetchLeaseTests: XCTestCase {
    private var client: PostgresClient!
    private var table = ""

    override func setUp() async throws {
        client = try XCTUnwrap(PostgresLevelTests.makeClient(), "LOADING_POSTGRES_URL names no PostgreSQL server")
        let running = Task { [client] in await client!.run() }
        addTeardownBlock { running.cancel() }
        table = "lease_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let (client, table) = (client!, table)
        addTeardownBlock {
            _ = try? await client.query("DROP TABLE IF EXISTS \(unescaped: table)")
            _ = try? await client.query("DROP TABLE IF EXISTS \(unescaped: table)_values")
        }
    }

    func test_oneInstanceHoldsALease_untilItGivesItBackOrItLapses() async throws {
        let first = try PostgresFetchLease<String>(client: client, table: table)
        let second = try PostgresFetchLease<String>(client: client, table: table)

        let taken = try await first.acquire("ACME", for: .seconds(30))
        let refused = try await second.acquire("ACME", for: .seconds(30))
        let otherKey = try await second.acquire("INIT", for: .milliseconds(100))
        try await first.release("ACME")
        let afterRelease = try await second.acquire("ACME", for: .seconds(30))
        try await Task.sleep(for: .milliseconds(300))
        let afterLapse = try await first.acquire("INIT", for: .seconds(30))

        XCTAssertTrue(taken)
        XCTAssertFalse(refused, "held by the first")
        XCTAssertTrue(otherKey)
        XCTAssertTrue(afterRelease)
        XCTAssertTrue(afterLapse, "the second's lease of INIT lapsed after 100 ms")
    }

    func test_lapsedLeases_leaveTheTableAsLeasesAreTaken_aBoundedBatchAtATime() async throws {
        let lease = try PostgresFetchLease<String>(client: client, table: table)
        // A lease of no duration: lapsed at once, and the next acquire may sweep.
        let first = try await lease.acquire("A", for: .zero)
        // 600 leases of instances that died holding them.
        try await client.query(
            """
            INSERT INTO \(unescaped: table) (key, holder, expires_at)
            SELECT 'dead' || g, 'gone', now() - interval '1 hour' FROM generate_series(1, 600) g
            """)

        let second = try await lease.acquire("B", for: .seconds(30))
        let afterOneSweep = try await leaseRows()
        let third = try await lease.acquire("C", for: .seconds(30))
        let beforeTheNextSweep = try await leaseRows()

        XCTAssertTrue(first && second && third)
        XCTAssertEqual(afterOneSweep, 102, "500 lapsed leases deleted, 101 left, and B's")
        XCTAssertEqual(beforeTheNextSweep, 103, "a sweep at most once per lease duration")
    }

    func test_aSweep_neverDeletesALeaseAnotherInstanceTookOverMeanwhile() async throws {
        // Leases of no duration: this instance sweeps at each acquire.
        let sweeping = try PostgresFetchLease<String>(client: client, table: table)
        _ = try await sweeping.acquire("INIT", for: .zero)
        try await client.query(
            """
            INSERT INTO \(unescaped: table) (key, holder, expires_at) VALUES ('"HOT"', 'gone', now() - interval '1 hour')
            """)

        // Another instance takes HOT's lapsed lease over; its transaction has not committed when a sweep begins.
        let takenOver = try await HeldTransaction(
            """
            UPDATE \(unescaped: table) SET holder = 'another', expires_at = now() + interval '1 hour'
            WHERE key = '"HOT"'
            """, on: client)
        let acquire = Task { try await sweeping.acquire("B", for: .zero) }
        let blocked = try await HeldTransaction.untilASessionWaitsForALock(on: client)
        XCTAssertTrue(blocked, "the sweep waits for the other instance's row")
        try await takenOver.commit()
        _ = try await acquire.value

        let third = try await PostgresFetchLease<String>(client: client, table: table).acquire("HOT", for: .seconds(30))
        XCTAssertFalse(third, "the lease taken over is held: the sweep left it")
    }

    private func leaseRows() async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM \(unescaped: table)")
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    func test_aThousandCallersOverTwoInstances_makeOneUpstreamCallForAColdKey() async throws {
        let upstream = SlowQuotes(latency: .milliseconds(100))
        let instances = try (0..<2).map { _ in
            Store(
                levels: [
                    .cache(MemoryCache<String, Quote>(), name: "memory"),
                    .cache(
                        try PostgresLevel<String, Quote>(client: client, table: table + "_values"), name: "postgres",
                        timeout: .seconds(60)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                // Bounds far past what a busy machine takes: a second upstream call could only be a defect.
                coordination: .lease(
                    try PostgresFetchLease<String>(client: client, table: table), sharedLevel: "postgres",
                    waiting: .seconds(120), polling: .milliseconds(20)))
        }

        let prices = try await withThrowingTaskGroup(of: Double?.self) { group in
            for index in 0..<1_000 {
                group.addTask { try await instances[index % 2].read("ACME").load().value?.price }
            }
            var prices: [Double?] = []
            for try await price in group { prices.append(price) }
            return prices
        }

        XCTAssertEqual(prices.count, 1_000)
        XCTAssertEqual(Set(prices), [100])
        XCTAssertEqual(upstream.calls, 1, "one upstream call across both instances")
    }

    func test_aFailureLeftOnALease_keepsEveryInstanceFromTakingIt_untilItsWindowEnds() async throws {
        let first = try PostgresFetchLease<String>(client: client, table: table)
        let second = try PostgresFetchLease<String>(client: client, table: table)

        let taken = try await first.acquire("NOPE", for: .seconds(30))
        try await first.release("NOPE", leaving: "unknown symbol", for: .milliseconds(300))
        let refusedToTheOther = try await second.acquire("NOPE", for: .seconds(30))
        let refusedToTheHolder = try await first.acquire("NOPE", for: .seconds(30))
        let failure = try await second.failure(of: "NOPE")
        let noFailure = try await second.failure(of: "ACME")
        try await Task.sleep(for: .milliseconds(400))
        let afterTheWindow = try await second.failure(of: "NOPE")
        let takenAfterTheWindow = try await second.acquire("NOPE", for: .seconds(30))
        let noFailureOnTheNewLease = try await first.failure(of: "NOPE")

        XCTAssertTrue(taken)
        XCTAssertFalse(refusedToTheOther)
        XCTAssertFalse(refusedToTheHolder, "the failure lasts for its holder too")
        XCTAssertEqual(failure, "unknown symbol")
        XCTAssertNil(noFailure)
        XCTAssertNil(afterTheWindow)
        XCTAssertTrue(takenAfterTheWindow)
        XCTAssertNil(noFailureOnTheNewLease, "a lease taken again holds no failure")
    }

    func test_aLeaseTableOfAnEarlierVersion_getsTheFailureColumn() async throws {
        try await client.query(
            """
            CREATE TABLE \(unescaped: table) (key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL)
            """)
        let lease = try PostgresFetchLease<String>(client: client, table: table)

        let taken = try await lease.acquire("NOPE", for: .seconds(30))
        try await lease.release("NOPE", leaving: "unknown symbol", for: .seconds(30))
        let failure = try await lease.failure(of: "NOPE")

        XCTAssertTrue(taken)
        XCTAssertEqual(failure, "unknown symbol")
    }

    func test_aRefusingOrHungUpstream_isAskedOnceAcrossTwoInstances_whileItsFailureLasts() async throws {
        // The upstream fails after 300 ms: a symbol it does not know, or a call that timed out.
        let upstream = SlowQuotes(latency: .milliseconds(300), failing: true)
        let instances = try (0..<2).map { _ in
            Store(
                levels: [
                    .cache(MemoryCache<String, Quote>(), name: "memory"),
                    .cache(
                        try PostgresLevel<String, Quote>(client: client, table: table + "_values"), name: "postgres",
                        timeout: .seconds(60)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                // Waiting far past what a busy machine takes: a second upstream call could only be a defect.
                coordination: .lease(
                    try PostgresFetchLease<String>(client: client, table: table), sharedLevel: "postgres",
                    waiting: .seconds(120), polling: .milliseconds(20),
                    failures: FetchFailureSharing(
                        for: .seconds(120), describe: { $0 is QuoteRefused ? "refused" : nil },
                        restore: { _ in QuoteRefused() })))
        }

        func readEverywhere(_ count: Int) async -> [Bool] {
            await withTaskGroup(of: Bool.self) { group in
                for index in 0..<count {
                    group.addTask { (try? await instances[index % 2].read("NOPE").load()) == nil }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        let whileFetching = await readEverywhere(100)
        let afterwards = await readEverywhere(100)

        XCTAssertEqual(whileFetching.filter { $0 }.count, 100, "every read failed")
        XCTAssertEqual(afterwards.filter { $0 }.count, 100)
        XCTAssertEqual(upstream.calls, 1, "one upstream call across both instances, and none while the failure lasts")
    }

    func test_savesLandingAfterTheirTimeout_asOnASaturatedMachine_costNoSecondUpstreamCall() async throws {
        let (calls, prices) = try await readOverTwoSaturatedInstances(leaseAnswersLate: false)

        XCTAssertEqual(Set(prices), [100])
        XCTAssertEqual(calls, 1, "the lease went back once the save landed, and the other instance found it")
    }

    func test_leaseCallsOutlastingTheTimeout_asOnASaturatedMachine_costNoSecondUpstreamCall() async throws {
        let (calls, prices) = try await readOverTwoSaturatedInstances(leaseAnswersLate: true)

        XCTAssertEqual(Set(prices), [100])
        XCTAssertEqual(calls, 1, "the lease was waited for: the database had answered the read")
    }

    /// Reads a cold key 20 times at once over two instances on a saturated machine: every save lands, and every
    /// lease call answers when `leaseAnswersLate`, 2 s late, past the level's 1 s timeout, while reads answer in time.
    /// Returns the upstream calls and the answers.
    private func readOverTwoSaturatedInstances(
        leaseAnswersLate: Bool
    ) async throws -> (calls: Int, prices: [Double?]) {
        let upstream = SlowQuotes(latency: .milliseconds(50))
        let table = LateSaves(try PostgresLevel<String, Quote>(client: client, table: table + "_values"))
        // The tables made, and connections open for the reads at once: those answer within the timeout.
        _ = try await PostgresFetchLease<String>(client: client, table: self.table).acquire("WARMUP", for: .zero)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try await table.value(for: "WARMUP") } }
            try await group.waitForAll()
        }
        let instances = try (0..<2).map { _ in
            let lease = try PostgresFetchLease<String>(client: client, table: self.table)
            return Store(
                levels: [
                    .cache(MemoryCache<String, Quote>(), name: "memory"),
                    .cache(table, name: "postgres", timeout: .seconds(1)),
                ],
                fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
                // Waiting far past what a busy machine takes: a second upstream call could only be a defect.
                coordination: .lease(
                    LateLease(lease, by: leaseAnswersLate ? .seconds(2) : .zero), sharedLevel: "postgres",
                    waiting: .seconds(120), polling: .milliseconds(20)))
        }
        let prices = try await withThrowingTaskGroup(of: Double?.self) { group in
            for index in 0..<20 {
                group.addTask { try await instances[index % 2].read("ACME").load().value?.price }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        return (upstream.calls, prices)
    }

    func test_aStoreShutDownMidFetch_givesItsLeaseBack_soThatAnotherInstanceTakesItAtOnce() async throws {
        let upstream = SlowQuotes(latency: .seconds(3_600))  // the fetch is under way when the store shuts down
        let store = Store(
            levels: [
                .cache(
                    try PostgresLevel<String, Quote>(client: client, table: table + "_values"), name: "postgres",
                    timeout: .seconds(60))
            ],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            coordination: .lease(
                try PostgresFetchLease<String>(client: client, table: table), sharedLevel: "postgres",
                holding: .seconds(3_600)))
        let other = try PostgresFetchLease<String>(client: client, table: table)
        let read = Task { try await store.read("ACME").load() }
        defer { read.cancel() }
        var fetching = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !fetching, ContinuousClock.now < deadline {
            fetching = upstream.calls == 1
            if !fetching { try await Task.sleep(for: .milliseconds(10)) }
        }
        let heldWhileFetching = try await other.acquire("ACME", for: .seconds(30))

        await store.shutDown(waitingAtMost: .seconds(5))
        let takenAfterTheShutdown = try await other.acquire("ACME", for: .seconds(30))

        XCTAssertTrue(fetching, "the store took the lease and asked the upstream")
        XCTAssertFalse(heldWhileFetching, "the lease is held for an hour")
        XCTAssertTrue(takenAfterTheShutdown, "given back by the shutdown")
    }

    func test_theDocumentedStore_fetchesUnderItsLease() async throws {
        let client: PostgresClient = client
        let upstream = SlowQuotes(latency: .zero)
        let quotesTable = try PostgresLevel<String, Quote>(client: client, table: table + "_values")
        _ = try await client.query("DROP TABLE IF EXISTS quote_leases")
        addTeardownBlock { _ = try? await client.query("DROP TABLE IF EXISTS quote_leases") }
        // Sample: begin
        let quoteLeases = try PostgresFetchLease<String>(client: client, table: "quote_leases")
        let store = Store(
            levels: [
                .cache(MemoryCache(), name: "memory"), .cache(quotesTable, name: "postgres", timeout: .seconds(1)),
            ],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            coordination: .lease(quoteLeases, sharedLevel: "postgres"))
        // Sample: end

        let quote = try await store.read("ACME").load()
        XCTAssertEqual(quote.value?.price, 100)
        let other = try PostgresFetchLease<String>(client: client, table: "quote_leases")
        // Given back in a task of its own once the save ended: polled, under a watchdog.
        var free = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !free, ContinuousClock.now < deadline {
            free = try await other.acquire("ACME", for: .seconds(1))
            if !free { try await Task.sleep(for: .milliseconds(10)) }
        }
        XCTAssertTrue(free, "the lease was given back once the fetch ended")
    }
}

/// An upstream that answers after `latency` (or fails with ``QuoteRefused``), counting its calls.
final class SlowQuotes: Sendable {
    private let count = Locked(0)
    private let latency: Duration
    private let failing: Bool

    init(latency: Duration, failing: Bool = false) {
        self.latency = latency
        self.failing = failing
    }

    var calls: Int { count.withLock { $0 } }

    func quote(_ symbol: String) -> AnyLoader<Quote> {
        AnyLoader { [count, latency, failing] completion in
            count.withLock { $0 += 1 }
            let task = Task {
                try? await Task.sleep(for: latency)
                guard !Task.isCancelled else { return }
                completion(failing ? .failure(QuoteRefused()) : .success(Quote(symbol: symbol, price: 100)))
            }
            return AnyCancellationToken { task.cancel() }
        }
    }
}

/// The upstream refused a quote.
struct QuoteRefused: Error {}

/// A lease whose acquires answer `lateness` late.
struct LateLease: FetchLease {
    let lease: PostgresFetchLease<String>
    let lateness: Duration

    init(_ lease: PostgresFetchLease<String>, by lateness: Duration) {
        self.lease = lease
        self.lateness = lateness
    }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        try await Task.sleep(for: lateness)
        return try await lease.acquire(key, for: duration)
    }

    func release(_ key: String) async throws { try await lease.release(key) }
}

/// A level whose saves land 2 s late.
struct LateSaves: AsyncKeyedCache {
    let level: PostgresLevel<String, Quote>

    init(_ level: PostgresLevel<String, Quote>) {
        self.level = level
    }

    func value(for key: String) async throws -> CachedValue<Quote>? { try await level.value(for: key) }

    func save(_ value: Quote, for key: String, savedAt: Date) async throws {
        // In a task of its own, not cancelled with the save's (which the timeout cancels): a query sent lands.
        try await Task { [level] in
            try await Task.sleep(for: .seconds(2))
            try await level.save(value, for: key, savedAt: savedAt)
        }.value
    }

    func removeValue(for key: String) async throws { try await level.removeValue(for: key) }
    func removeAll() async throws { try await level.removeAll() }
}
