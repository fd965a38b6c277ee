import FaultInjection
import Foundation
import Loading
import LoadingPostgres
import PostgresNIO
import XCTest

/// A service's store (a memory level, a PostgreSQL level with a timeout, the PostgreSQL lease) when its database
/// fails as it does in production: stopped, slow, hung, or a holder of a lease killed. The database is a real one
/// behind ``FaultyProxy``; the store's client goes through the proxy, the test's own client does not.
///
/// What *On a server* promises: a cold key costs at most the level read's, the lease call's and the save's timeouts,
/// plus the fetch, however the database fails (the save's not, when the level saves in the background); a value held
/// in memory is served at once.
final class DatabaseFaultTests: XCTestCase {
    /// Each call of the level and of the lease gives up after this.
    private static let timeout = Duration.milliseconds(300)
    /// What the documentation bounds a cold key's read by: the level's read, the lease's acquire and the save (a
    /// level's operation gives up between its timeout and a quarter more).
    private static let bound = timeout * 3 + timeout / 2
    /// What a busy machine may add to the bound, to schedule the timers and threads (a watchdog: without the bound, the
    /// read would wait until the database answers, which it never does in these tests).
    private static let scheduling = Duration.seconds(15)

    private var direct: PostgresClient!
    private var faulty: PostgresClient!
    private var database: FaultyProxy!
    private var table = ""

    override func setUp() async throws {
        let url = try XCTUnwrap(PostgresLevelTests.serverURL(), "LOADING_POSTGRES_URL names no PostgreSQL server")
        direct = PostgresLevelTests.makeClient(host: url.host, port: url.port)
        database = try FaultyProxy(host: url.host, port: url.port)
        faulty = PostgresLevelTests.makeClient(host: "127.0.0.1", port: database.port)
        for client in [direct!, faulty!] {
            let running = Task { await client.run() }
            addTeardownBlock { running.cancel() }
        }
        table = "fault_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let (direct, table) = (direct!, table)
        addTeardownBlock {
            _ = try? await direct.query("DROP TABLE IF EXISTS \(unescaped: table)")
            _ = try? await direct.query("DROP TABLE IF EXISTS \(unescaped: table)_leases")
        }
        // Both tables made before any fault, by the test's own client.
        _ = try await PostgresLevel<String, Quote>(client: direct, table: table).value(for: "warm")
        _ = try await PostgresFetchLease<String>(client: direct, table: table + "_leases").acquire("warm", for: .zero)
    }

    func test_aStoppedDatabase_costsAColdKeyTheBound_andAHeldKeyNothing() async throws {
        let upstream = SlowQuotes(latency: .zero)
        let store = try instance(fetching: upstream)
        let warm = try await store.read("HELD").load()
        XCTAssertEqual(warm.origin, .network)

        database.stop()
        let (cold, waited) = try await timed { try await store.read("COLD").load() }
        let held = try await store.read("HELD").load()

        XCTAssertEqual(cold.origin, .network, "fetched once every call of the database gave up")
        XCTAssertEqual(cold.value?.price, 100)
        XCTAssertLessThan(waited, Self.bound + Self.scheduling, "took \(waited)")
        XCTAssertEqual(held.value?.price, 100)
        XCTAssertEqual(upstream.calls, 2, "the held key served from memory: neither the database nor upstream asked")
    }

    func test_aSlowDatabase_costsAColdKeyTheBound_notItsDelay() async throws {
        let upstream = SlowQuotes(latency: .zero)
        let store = try instance(fetching: upstream)
        _ = try await store.read("WARM").load()  // the client's connections open

        // Each message takes a second each way: every call would take two seconds at least.
        database.behave(.delaying(.seconds(1)))
        let (cold, waited) = try await timed { try await store.read("COLD").load() }

        XCTAssertEqual(cold.origin, .network)
        XCTAssertLessThan(waited, Self.bound + Self.scheduling, "took \(waited)")
        XCTAssertEqual(upstream.calls, 2)
    }

    func test_aHungDatabase_costsAColdKeyTheBound() async throws {
        let upstream = SlowQuotes(latency: .zero)
        let store = try instance(fetching: upstream)
        _ = try await store.read("WARM").load()

        database.behave(.hanging)
        let (cold, waited) = try await timed { try await store.read("COLD").load() }
        let again = try await store.read("COLD").load()

        XCTAssertEqual(cold.origin, .network)
        XCTAssertLessThan(waited, Self.bound + Self.scheduling, "took \(waited)")
        XCTAssertEqual(again.value?.price, 100)
        XCTAssertEqual(upstream.calls, 2, "kept in memory although the save never landed")
    }

    func test_aHungDatabase_costsAColdKeyTheReadAndTheLeaseOnly_whenTheLevelSavesInTheBackground() async throws {
        let upstream = SlowQuotes(latency: .zero)
        let store = try instance(fetching: upstream, savingInBackground: true)
        _ = try await store.read("WARM").load()

        database.behave(.hanging)
        let (cold, waited) = try await timed { try await store.read("COLD").load() }

        XCTAssertEqual(cold.origin, .network)
        XCTAssertLessThan(waited, Self.timeout * 2 + Self.timeout / 4 + Self.scheduling, "took \(waited)")
        XCTAssertEqual(upstream.calls, 2)
    }

    func test_aHolderKilledMidLease_isTakenOverWhenTheLeaseLapses_notAfterWaiting() async throws {
        // An instance took the key's lease for a second, then was killed: it never saves, never gives it back.
        let holding = Duration.seconds(1)
        let killed = try PostgresFetchLease<String>(client: direct, table: table + "_leases")
        let taken = try await killed.acquire("ACME", for: holding)
        XCTAssertTrue(taken)
        let upstream = SlowQuotes(latency: .zero)
        // Waiting far past what a busy machine takes: an answer before it is the lapsed lease taken over.
        let store = try instance(fetching: upstream, holding: holding, waiting: .seconds(300), client: direct)

        let (quote, waited) = try await timed { try await store.read("ACME").load() }

        XCTAssertEqual(quote.origin, .network, "this instance took the lapsed lease and fetched")
        XCTAssertEqual(upstream.calls, 1)
        XCTAssertLessThan(waited, .seconds(120), "took \(waited): the lease was not taken over")
    }

    // MARK: - Helpers

    /// An instance of the service: the store's memory, this test's table and lease through the proxy (or `client`),
    /// the table saving in the background when asked.
    private func instance(
        fetching upstream: SlowQuotes, holding: Duration = .seconds(10), waiting: Duration = .seconds(2),
        client: PostgresClient? = nil, savingInBackground: Bool = false
    ) throws -> Store<String, Quote> {
        let client = client ?? faulty!
        let shared = StoreLevel.cache(
            try PostgresLevel<String, Quote>(client: client, table: table), name: "postgres", timeout: Self.timeout)
        return Store(
            levels: [
                .cache(MemoryCache<String, Quote>(), name: "memory"),
                savingInBackground ? shared.savingInBackground() : shared,
            ],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
            coordination: .lease(
                try PostgresFetchLease<String>(client: client, table: table + "_leases"), sharedLevel: "postgres",
                holding: holding, waiting: waiting, polling: .milliseconds(20)))
    }

    /// What `body` answers, and how long it took.
    private func timed<Answer>(_ body: () async throws -> Answer) async rethrows -> (Answer, Duration) {
        let started = ContinuousClock.now
        let answer = try await body()
        let waited = ContinuousClock.now - started
        print("\(name): answered after \(waited)")
        return (answer, waited)
    }
}
