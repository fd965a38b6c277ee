import Foundation
import Loading
import PostgresNIO

/// A fetch lease in a PostgreSQL table, for the instances of a service sharing a ``PostgresLevel``: the instance that
/// takes a key's lease fetches it, the others wait for its value in the level (see `FetchCoordination`).
///
/// ```swift
/// let quoteLeases = try PostgresFetchLease<String>(client: client, table: "quote_leases")
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory"), .cache(quotesTable, name: "postgres", timeout: .seconds(1))],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     coordination: .lease(quoteLeases, sharedLevel: "postgres"))
/// ```
///
/// One row per key held: who holds it and until when, by the database's clock (`now()`), so that the instances'
/// clocks do not matter. A lease that lapsed is taken over by the next instance that asks; an acquire deletes up to 500
/// lapsed rows, at most once per lease duration per instance, so the rows of dead holders do not pile up.
///
/// Each `PostgresFetchLease` is one holder, and takes a key it holds again: give each store its own (two stores of one
/// process sharing one would both take a key's lease, and both fetch it).
public final class PostgresFetchLease<Key: Hashable & Sendable & Codable>: FetchLease {
    private let client: PostgresClient
    private let leases: Table
    private var table: String { leases.name }
    /// This instance, as the rows it holds name it.
    private let holder = UUID().uuidString

    /// A lease over `table` (lowercase letters, digits and underscores), through `client`, which the app runs.
    /// - Throws: ``PostgresLevelError/invalidTableName(_:)`` when `table` is not such a name.
    public init(client: PostgresClient, table: String) throws {
        guard
            let leases = Table(
                table,
                columns: "key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL, failure text",
                indexed: "expires_at", added: ["failure text"], client: client)
        else { throw PostgresLevelError.invalidTableName(table) }
        self.client = client
        self.leases = leases
    }

    /// Takes the lease of `key` for `duration` unless another instance holds one that has not lapsed (this instance
    /// takes its own again), or a failure left on it lasts.
    public func acquire(_ key: Key, for duration: Duration) async throws -> Bool {
        let id = try Table.rowKey(key)
        await sweepLapsedLeases(every: duration)
        return try await attempt(.save, key: id) {
            let rows = try await client.query(
                """
                INSERT INTO \(unescaped: table) (key, holder, expires_at)
                VALUES (\(id), \(holder), now() + make_interval(secs => \(duration.seconds)))
                ON CONFLICT (key) DO UPDATE
                SET holder = excluded.holder, expires_at = excluded.expires_at, failure = NULL
                WHERE \(unescaped: table).expires_at <= now()
                    OR (\(unescaped: table).holder = excluded.holder AND \(unescaped: table).failure IS NULL)
                RETURNING holder
                """)
            for try await _ in rows.decode(String.self) { return true }
            return false
        }
    }

    /// Gives back the lease of `key` when this instance holds it, leaving `failure` on it for `duration`: no instance
    /// takes it meanwhile, and ``failure(of:)`` answers `failure`.
    public func release(_ key: Key, leaving failure: String, for duration: Duration) async throws {
        let id = try Table.rowKey(key)
        try await attempt(.save, key: id) {
            try await client.query(
                """
                UPDATE \(unescaped: table)
                SET failure = \(failure), expires_at = now() + make_interval(secs => \(duration.seconds))
                WHERE key = \(id) AND holder = \(holder)
                """)
        }
    }

    /// The failure left on the lease of `key`, while it lasts.
    public func failure(of key: Key) async throws -> String? {
        let id = try Table.rowKey(key)
        return try await attempt(.read, key: id) {
            let rows = try await client.query(
                "SELECT failure FROM \(unescaped: table) WHERE key = \(id) AND expires_at > now()")
            for try await failure in rows.decode(String?.self) { return failure }
            return nil
        }
    }

    /// Gives back the lease of `key`, when this instance holds it.
    public func release(_ key: Key) async throws {
        let id = try Table.rowKey(key)
        try await attempt(.removal, key: id) {
            try await client.query("DELETE FROM \(unescaped: table) WHERE key = \(id) AND holder = \(holder)")
        }
    }

    /// Deletes a batch of at most `Table.sweepLimit` lapsed leases (their holders died, or gave them up unreleased),
    /// at most once every `interval` per instance: a lapsed row is a free lease, so deleting it changes no answer, and
    /// the table holds about the keys fetched lately. A failed sweep changes nothing.
    ///
    /// The lapse is judged again on the row deleted: a lease another instance took over while the sweep ran (its
    /// transaction committed after the sweep chose the keys) is held, and stays.
    private func sweepLapsedLeases(every interval: Duration) async {
        guard leases.sweepIsDue(every: interval, now: Date()), (try? await leases.ensureCreated()) != nil else {
            return
        }
        _ = try? await client.query(
            """
            DELETE FROM \(unescaped: table) WHERE expires_at <= now() AND key IN (
                SELECT key FROM \(unescaped: table) WHERE expires_at <= now() LIMIT \(Table.sweepLimit))
            """)
    }

    @discardableResult
    private func attempt<Result: Sendable>(
        _ operation: LevelOperation, key: String, _ body: () async throws -> Result
    ) async throws -> Result {
        do {
            try await leases.ensureCreated()
            return try await body()
        } catch {
            throw PostgresLevelError.failed(operation, table: table, key: key, underlying: error)
        }
    }
}
