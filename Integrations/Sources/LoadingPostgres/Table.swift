import Foundation
import Loading
import PostgresNIO

/// A table of this package's: its name (checked, never quoted), and its creation on first use.
final class Table: Sendable {
    let name: String
    private let client: PostgresClient
    private let columns: String
    /// The column kept indexed, for the sweeps that select by it.
    private let indexed: String?
    /// The columns (SQL) a table made by an earlier version gets when first used.
    private let added: [String]
    private let created = Locked(false)
    /// When this instance sweeps the table next.
    private let nextSweep = Locked(Date.distantPast)

    /// How many rows a sweep deletes at most: a table shrinks as it is used, by bounded steps over its index.
    static let sweepLimit = 500

    /// A table `name` with `columns` (SQL) and an index on the column `indexed` when given, through `client`; `nil`
    /// when `name` is not one this package takes. `added` are the columns among `columns` that an earlier version's
    /// table lacks.
    init?(_ name: String, columns: String, indexed: String? = nil, added: [String] = [], client: PostgresClient) {
        guard Table.isName(name) else { return nil }
        self.name = name
        self.columns = columns
        self.indexed = indexed
        self.added = added
        self.client = client
    }

    /// Whether this instance sweeps the table now: at most once every `interval` (by `now`), whatever the number of
    /// requests.
    func sweepIsDue(every interval: Duration, now: Date) -> Bool {
        let seconds = interval.seconds
        return nextSweep.withLock { next in
            guard now >= next else { return false }
            next = now.addingTimeInterval(seconds)
            return true
        }
    }

    /// Creates the table unless it was created already: once, then never asked again; tried again after a failure.
    func ensureCreated() async throws {
        guard !created.withLock({ $0 }) else { return }
        // Concurrent first operations may each run it: CREATE TABLE IF NOT EXISTS is idempotent.
        let create: PostgresQuery = "CREATE TABLE IF NOT EXISTS \(unescaped: name) (\(unescaped: columns))"
        do {
            try await client.query(create)
        } catch {
            // Two instances creating the table at once: one fails on PostgreSQL's catalog; the table is there when it
            // tries again.
            try await client.query(create)
        }
        if let indexed {
            // A table made by an earlier version gets its index here too.
            let index: PostgresQuery =
                "CREATE INDEX IF NOT EXISTS \(unescaped: name)_\(unescaped: indexed) ON \(unescaped: name) (\(unescaped: indexed))"
            do {
                try await client.query(index)
            } catch {
                try await client.query(index)
            }
        }
        for column in added {
            try await client.query("ALTER TABLE \(unescaped: name) ADD COLUMN IF NOT EXISTS \(unescaped: column)")
        }
        created.withLock { $0 = true }
    }

    /// Whether `name` can name a table here: lowercase letters, digits and underscores, not starting with a digit, at
    /// most 63 (PostgreSQL's limit); never quoted, so never an injection.
    static func isName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 63 else { return false }
        let letters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz_")
        let rest = letters.union(CharacterSet(charactersIn: "0123456789"))
        return letters.contains(first) && name.unicodeScalars.allSatisfy(rest.contains)
    }

    /// `key` as the text of a row's key: JSON, with the keys of its objects sorted, so that one key is one text.
    static func rowKey(_ key: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(key), as: UTF8.self)
    }
}
