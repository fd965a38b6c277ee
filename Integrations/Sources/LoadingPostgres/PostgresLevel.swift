import Foundation
import Loading
import PostgresNIO

/// A ``Store`` level in a PostgreSQL table, shared by every instance of a service that reads and writes it: one row
/// per key, the value as JSON (a `jsonb` column a person can query), and the date the store saved it.
///
/// ```swift
/// let quotesTable = try PostgresLevel<String, Quote>(client: client, table: "quotes", maxAge: .seconds(60))
/// let store = Store(
///     levels: [.cache(MemoryCache(countLimit: 10_000), name: "memory"),
///              .cache(quotesTable, name: "postgres", timeout: .milliseconds(200))],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) })
/// ```
///
/// - The table is created on first use (`CREATE TABLE IF NOT EXISTS`), with the columns `key text` (the key as JSON,
///   the primary key), `value jsonb` and `saved_at timestamptz`.
/// - **Dates come from the instances' clocks**: a row's `saved_at` is the date the store that wrote it learned the
///   value (its `now`), and `maxAge` is judged against this level's `now`, never the database's `now()`. Instances
///   whose clocks disagree by a second see a value's age off by that second: keep their clocks synchronized (NTP).
/// - A save replaces the row whatever its date (the last save wins, as in every level); a clear of a store deletes
///   every row of the table, for every instance.
/// - A row that no longer decodes as `Value` (its type changed) is reported as ``PostgresLevelError`` by a read, which
///   a store counts as a miss; the next save replaces it.
/// - **The table shrinks as it is used**: with a `maxAge`, a save deletes up to 500 rows past their age, the oldest
///   first, at most once every `maxAge` per instance (over an index on `saved_at`, made with the table): no scan per
///   request, and a key no longer asked for leaves the table within about twice `maxAge`.
public final class PostgresLevel<Key: Hashable & Sendable & Codable, Value: Sendable & Codable>: AsyncKeyedCache {
    private let client: PostgresClient
    private let rows: Table
    private var table: String { rows.name }
    private let maxAge: Duration?
    private let now: @Sendable () -> Date

    /// A level over `table` (lowercase letters, digits and underscores), through `client`, which the app runs.
    /// - Parameters:
    ///   - maxAge: how long a value is served after it was saved; `nil`: until it is replaced or removed.
    ///   - now: the clock ages are judged with (give the store the same one).
    /// - Throws: ``PostgresLevelError/invalidTableName(_:)`` when `table` is not such a name.
    public init(
        client: PostgresClient, table: String, maxAge: Duration? = nil, now: @escaping @Sendable () -> Date = Date.init
    ) throws {
        guard
            let rows = Table(
                table, columns: "key text PRIMARY KEY, value jsonb NOT NULL, saved_at timestamptz NOT NULL",
                indexed: "saved_at", client: client)
        else { throw PostgresLevelError.invalidTableName(table) }
        self.client = client
        self.rows = rows
        self.maxAge = maxAge
        self.now = now
    }

    /// The value saved for `key` with its date; `nil` when there is none or it is older than `maxAge`.
    public func value(for key: Key) async throws -> CachedValue<Value>? {
        let id = try encodedKey(key, for: .read)
        let row = try await attempt(.read, key: id) { () -> (String, Date)? in
            let rows = try await client.query(
                "SELECT value::text, saved_at FROM \(unescaped: table) WHERE key = \(id)")
            for try await row in rows.decode((String, Date).self) { return row }
            return nil
        }
        guard let (json, savedAt) = row else { return nil }
        if let maxAge, now().timeIntervalSince(savedAt) >= maxAge.seconds || savedAt > now() { return nil }
        do {
            return CachedValue(try JSONDecoder().decode(Value.self, from: Data(json.utf8)), savedAt: savedAt)
        } catch {
            throw PostgresLevelError.undecodableValue(table: table, key: id, underlying: error)
        }
    }

    /// Saves `value` for `key` as saved at `savedAt`, replacing the row.
    public func save(_ value: Value, for key: Key, savedAt: Date) async throws {
        let id = try encodedKey(key, for: .save)
        let json: String
        do {
            json = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw PostgresLevelError.failed(.save, table: table, key: id, underlying: error)
        }
        try await attempt(.save, key: id) {
            try await client.query(
                """
                INSERT INTO \(unescaped: table) (key, value, saved_at) VALUES (\(id), \(json)::jsonb, \(savedAt))
                ON CONFLICT (key) DO UPDATE SET value = excluded.value, saved_at = excluded.saved_at
                """)
        }
        await sweepRowsPastTheirAge()
    }

    /// Deletes a batch of at most `Table.sweepLimit` rows older than `maxAge` (by this level's `now`), the oldest
    /// first, at most once every `maxAge` per instance: the table keeps what can still be served, and the rows of keys
    /// no longer asked for go within about twice `maxAge`. A failed sweep changes nothing; the next one tries again.
    ///
    /// The age is judged again on the row deleted: a row another instance saved again while the sweep ran (its
    /// transaction committed after the sweep chose the keys) is young, and stays.
    private func sweepRowsPastTheirAge() async {
        guard let maxAge else { return }
        let now = now()
        guard rows.sweepIsDue(every: maxAge, now: now) else { return }
        let cutoff = now.addingTimeInterval(-maxAge.seconds)
        _ = try? await client.query(
            """
            DELETE FROM \(unescaped: table) WHERE saved_at < \(cutoff) AND key IN (
                SELECT key FROM \(unescaped: table) WHERE saved_at < \(cutoff) ORDER BY saved_at LIMIT \(Table.sweepLimit))
            """)
    }

    /// Deletes the row of `key`, if any.
    public func removeValue(for key: Key) async throws {
        let id = try encodedKey(key, for: .removal)
        try await attempt(.removal, key: id) {
            try await client.query("DELETE FROM \(unescaped: table) WHERE key = \(id)")
        }
    }

    /// Deletes every row of the table.
    public func removeAll() async throws {
        try await attempt(.removalOfEveryValue, key: nil) {
            try await client.query("DELETE FROM \(unescaped: table)")
        }
    }

    // MARK: - Private

    /// Runs `body` once the table exists, turning the database's errors into ``PostgresLevelError``.
    @discardableResult
    private func attempt<Result: Sendable>(
        _ operation: LevelOperation, key: String?, _ body: () async throws -> Result
    ) async throws -> Result {
        do {
            try await rows.ensureCreated()
            return try await body()
        } catch let error as PostgresLevelError {
            throw error
        } catch {
            throw PostgresLevelError.failed(operation, table: table, key: key, underlying: error)
        }
    }

    private func encodedKey(_ key: Key, for operation: LevelOperation) throws -> String {
        do {
            return try Table.rowKey(key)
        } catch {
            throw PostgresLevelError.failed(operation, table: table, key: String(describing: key), underlying: error)
        }
    }
}

/// The failure of a ``PostgresLevel``: a bad table name, a database error, or a row that does not decode.
public enum PostgresLevelError: Error, CustomStringConvertible, LocalizedError {
    /// `table` is not a name the level takes: lowercase letters, digits and underscores, not starting with a digit.
    case invalidTableName(String)
    /// An operation on `table` failed (for `key`, as JSON, when it was about one key).
    case failed(LevelOperation, table: String, key: String?, underlying: any Error)
    /// The row of `key` (as JSON) in `table` does not decode as the level's value type.
    case undecodableValue(table: String, key: String, underlying: any Error)

    public var description: String {
        switch self {
        case .invalidTableName(let name):
            "“\(name)” cannot name a PostgreSQL level's table: use lowercase letters, digits and underscores, "
                + "starting with a letter or an underscore (at most 63)."
        case .failed(let operation, let table, let key, let underlying):
            "A \(operation.rawValue)" + (key.map { " of the key \($0)" } ?? "") + " in the PostgreSQL table "
                + "“\(table)” failed: \(String(reflecting: underlying))."
        case .undecodableValue(let table, let key, let underlying):
            "The value of the key \(key) in the PostgreSQL table “\(table)” does not decode: \(underlying)."
        }
    }

    public var errorDescription: String? { description }
}

extension Duration {
    /// The duration in seconds, for PostgreSQL's intervals.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
