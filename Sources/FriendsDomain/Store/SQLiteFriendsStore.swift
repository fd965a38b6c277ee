import Dispatch
import Foundation

/// A friends store in an SQLite database: the second source of a composition, kept across launches.
///
/// One connection, used from one serial queue; values are always bound, never spliced into SQL; every multi-row
/// write runs in one transaction, so a failed write leaves the previous rows intact; the database is in WAL mode;
/// and the schema version lives in `PRAGMA user_version`, migrated step by step when the store opens.
///
/// Opening happens on first use. A file that is not a database, a file that cannot be written, or any other SQLite
/// failure reaches the caller as an ``SQLiteError`` through the operation's completion, never as a crash. A file that
/// cannot be written, or that sits in a folder that cannot be written (a seed database in an app's bundle), is still
/// read; writes to it fail with ``SQLiteError/isReadOnly``.
/// ```swift
/// let database = SQLiteFriendsStore(fileURL: applicationSupport.appendingPathComponent("friends.sqlite"))
/// ```
public final class SQLiteFriendsStore: FriendsStore {
    /// The schema version this code writes.
    static let currentVersion = 2

    private let path: String
    private let targetVersion: Int
    private let connection: QueueConfined<SQLiteConnection?>

    /// Creates a store on the database file at `fileURL` (created if missing).
    public convenience init(fileURL: URL) {
        self.init(path: fileURL.path, targetVersion: Self.currentVersion)
    }

    /// Creates a store on a private in-memory database, gone when the store is: for tests and previews.
    public static func inMemory() -> SQLiteFriendsStore {
        SQLiteFriendsStore(path: ":memory:", targetVersion: currentVersion)
    }

    /// Creates a store that migrates the schema no further than `targetVersion` (tests build old databases so).
    init(path: String, targetVersion: Int) {
        self.path = path
        self.targetVersion = targetVersion
        connection = QueueConfined(nil, queue: DispatchQueue(label: "FriendsDomain.SQLiteFriendsStore"))
    }

    public func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void) {
        perform(completion) { (db: SQLiteConnection) throws(SQLiteError) in
            var savedAt: Date?
            try db.run("SELECT saved_at FROM cache_info WHERE singleton = 1", operation: "retrieve") { row in
                savedAt = Date(timeIntervalSince1970: row.real(0))
            }
            guard let savedAt else { return nil }
            var friends: [Friend] = []
            try db.run(
                "SELECT id, name, status, avatar_url, updated_at FROM friend ORDER BY position", operation: "retrieve"
            ) { row in
                friends.append(
                    Friend(
                        id: row.text(0) ?? "",
                        name: row.text(1) ?? "",
                        status: Friend.Status(rawValue: row.text(2) ?? ""),
                        avatarURL: row.text(3).flatMap(URL.init(string:)),
                        updatedAt: Date(timeIntervalSince1970: row.real(4))))
            }
            return CachedFriends(friends: friends, timestamp: savedAt)
        }
    }

    public func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        perform(completion) { (db: SQLiteConnection) throws(SQLiteError) in
            try db.transaction(operation: "replace all") { () throws(SQLiteError) in
                try db.run("DELETE FROM friend", operation: "replace all")
                let insert = try db.prepared(
                    """
                    INSERT INTO friend (id, position, name, status, avatar_url, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """, operation: "replace all")
                for (position, friend) in friends.deduplicatedByID().enumerated() {
                    try db.run(insert, operation: "replace all") { (statement: OpaquePointer) throws(SQLiteError) in
                        try db.bind(.text(friend.id), at: 1, in: statement, operation: "replace all")
                        try db.bind(.integer(Int64(position)), at: 2, in: statement, operation: "replace all")
                        try db.bind(.text(friend.name), at: 3, in: statement, operation: "replace all")
                        try db.bind(.text(friend.status.rawValue), at: 4, in: statement, operation: "replace all")
                        try db.bind(
                            friend.avatarURL.map { .text($0.absoluteString) } ?? .null, at: 5, in: statement,
                            operation: "replace all")
                        try db.bind(
                            .real(friend.updatedAt.timeIntervalSince1970), at: 6, in: statement,
                            operation: "replace all")
                    }
                }
                try Self.stamp(timestamp, in: db, operation: "replace all")
            }
        }
    }

    public func upsert(
        _ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        perform(completion) { (db: SQLiteConnection) throws(SQLiteError) in
            try db.transaction(operation: "upsert") { () throws(SQLiteError) in
                try db.run(
                    """
                    INSERT INTO friend (id, position, name, status, avatar_url, updated_at)
                    VALUES (?, (SELECT COALESCE(MAX(position), -1) + 1 FROM friend), ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET
                        name = excluded.name, status = excluded.status,
                        avatar_url = excluded.avatar_url, updated_at = excluded.updated_at
                    """,
                    Self.values(of: friend, position: nil), operation: "upsert")
                try Self.stamp(timestamp, in: db, operation: "upsert")
            }
        }
    }

    public func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        perform(completion) { (db: SQLiteConnection) throws(SQLiteError) in
            try db.run("DELETE FROM friend WHERE id = ?", [.text(id)], operation: "delete")
        }
    }

    /// Deletes every friend. A file that is not a readable database (corrupt, truncated, another format) is deleted
    /// and a new database created in its place, so that the cache heals instead of failing for ever.
    public func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let path = self.path
        let targetVersion = self.targetVersion
        let recreateUnreadableFile: @Sendable (inout SQLiteConnection?, SQLiteError) -> Result<Void, any Error>? = {
            db, error in
            guard error.isUnreadableDatabase, path != ":memory:" else { return nil }
            db = nil
            return Result {
                for suffix in ["", "-wal", "-shm", "-journal"]
                where FileManager.default.fileExists(atPath: path + suffix) {
                    try FileManager.default.removeItem(atPath: path + suffix)
                }
                db = try Self.open(path: path, targetVersion: targetVersion)
            }
        }
        perform(completion, recovering: recreateUnreadableFile) { (db: SQLiteConnection) throws(SQLiteError) in
            try Self.deleteRows(in: db)
        }
    }

    private static func deleteRows(in db: SQLiteConnection) throws(SQLiteError) {
        try db.transaction(operation: "delete all") { () throws(SQLiteError) in
            try db.run("DELETE FROM friend", operation: "delete all")
            try db.run("DELETE FROM cache_info", operation: "delete all")
        }
    }

    // MARK: - Machinery

    /// Closes the connection (it reopens on next use). Tests close a store before touching its file.
    func closeConnection() {
        let connection = self.connection
        connection.queue.sync { connection.withValue { $0 = nil } }
    }

    /// Runs `sql` on the store's connection: tests install triggers that make a write fail halfway.
    func executeForTesting(_ sql: String) throws {
        let connection = self.connection
        let path = self.path
        let targetVersion = self.targetVersion
        _ = try connection.queue.sync {
            try connection.withValue { db throws(SQLiteError) -> Int in
                if db == nil { db = try Self.open(path: path, targetVersion: targetVersion) }
                try db!.execute(sql, operation: "test")
                return 0
            }
        }
    }

    /// The schema version of the open database, for tests of the migration.
    func schemaVersion() throws -> Int {
        let connection = self.connection
        let path = self.path
        let targetVersion = self.targetVersion
        return try connection.queue.sync {
            try connection.withValue { db throws(SQLiteError) -> Int in
                if db == nil { db = try Self.open(path: path, targetVersion: targetVersion) }
                return Int(try db!.integerPragma("user_version", operation: "read version"))
            }
        }
    }

    /// Runs `work` on the store's queue with an open, migrated connection, and completes with its outcome; on an
    /// SQLite error, `recover` (when given) may replace the connection and the outcome.
    private func perform<Success: Sendable>(
        _ completion: @escaping @Sendable (Result<Success, any Error>) -> Void,
        recovering recover: (@Sendable (inout SQLiteConnection?, SQLiteError) -> Result<Success, any Error>?)? = nil,
        _ work: @escaping @Sendable (SQLiteConnection) throws(SQLiteError) -> Success
    ) {
        let connection = self.connection
        let path = self.path
        let targetVersion = self.targetVersion
        connection.queue.async {
            let result = connection.withValue { db -> Result<Success, any Error> in
                do throws(SQLiteError) {
                    if db == nil { db = try Self.open(path: path, targetVersion: targetVersion) }
                    return .success(try work(db!))
                } catch {
                    return recover?(&db, error) ?? .failure(error)
                }
            }
            completion(result)
        }
    }

    private static func open(path: String, targetVersion: Int) throws(SQLiteError) -> SQLiteConnection {
        do throws(SQLiteError) {
            let db = try SQLiteConnection(path: path)
            do throws(SQLiteError) {
                if path != ":memory:" { try enableWriteAheadLogging(db) }
                try migrate(db, to: targetVersion)
            } catch  where error.isReadOnly {
                // A read-only file: loads read what is there, writes fail with a typed read-only error. A database
                // too old to read without migrating it cannot be served.
                guard Int(try db.integerPragma("user_version", operation: "open")) > 0 else { throw error }
            }
            return db
        } catch  where (error.isReadOnly || error.primaryCode == 14) && isExistingFileInReadOnlyFolder(path) {
            // A database in a folder that cannot be written (a seed database in an app's bundle): SQLite cannot
            // make its -wal and -shm files there, so the file is opened immutable, to read; writes fail read-only.
            let db = try SQLiteConnection(path: path, immutable: true)
            guard Int(try db.integerPragma("user_version", operation: "open")) > 0 else { throw error }
            return db
        }
    }

    private static func isExistingFileInReadOnlyFolder(_ path: String) -> Bool {
        let folder = (path as NSString).deletingLastPathComponent
        return path != ":memory:" && FileManager.default.fileExists(atPath: path)
            && !FileManager.default.isWritableFile(atPath: folder.isEmpty ? "." : folder)
    }

    /// Switches the file to WAL. Switching needs the file to itself, and SQLite answers "busy" at once (without its
    /// busy handler) while another connection holds it, as when two stores open a new file together: wait a little
    /// and try again, for up to about five seconds, on the store's own queue.
    private static func enableWriteAheadLogging(_ db: SQLiteConnection) throws(SQLiteError) {
        var waited = 0
        while true {
            do throws(SQLiteError) {
                return try db.execute("PRAGMA journal_mode = WAL", operation: "open")
            } catch  where error.primaryCode == 5 && waited < 5_000 {
                let pause = min(5 + waited / 10, 50)
                usleep(useconds_t(pause * 1_000))
                waited += pause
            }
        }
    }

    /// The schema, one step per version: step N takes a database from version N-1 to N.
    static let migrations: [String] = [
        """
        CREATE TABLE friend (
            id TEXT PRIMARY KEY NOT NULL,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,
            status TEXT NOT NULL,
            avatar_url TEXT,
            updated_at REAL NOT NULL
        );
        CREATE TABLE cache_info (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            saved_at REAL NOT NULL
        );
        """,
        """
        CREATE INDEX friend_updated_at ON friend (updated_at);
        """,
    ]

    private static func migrate(_ db: SQLiteConnection, to targetVersion: Int) throws(SQLiteError) {
        guard Int(try db.integerPragma("user_version", operation: "migrate")) < targetVersion else { return }
        try db.transaction(operation: "migrate") { () throws(SQLiteError) in
            // Read again under the write lock: another connection may have migrated the file meanwhile.
            let version = Int(try db.integerPragma("user_version", operation: "migrate"))
            guard version < targetVersion else { return }
            for step in version..<targetVersion {
                try db.execute(migrations[step], operation: "migrate to version \(step + 1)")
            }
            try db.execute("PRAGMA user_version = \(targetVersion)", operation: "migrate")
        }
    }

    private static func stamp(_ timestamp: Date, in db: SQLiteConnection, operation: String) throws(SQLiteError) {
        try db.run(
            "INSERT INTO cache_info (singleton, saved_at) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET saved_at = excluded.saved_at",
            [.real(timestamp.timeIntervalSince1970)], operation: operation)
    }

    private static func values(of friend: Friend, position: Int64?) -> [SQLiteValue] {
        var values: [SQLiteValue] = [.text(friend.id)]
        if let position { values.append(.integer(position)) }
        values += [
            .text(friend.name),
            .text(friend.status.rawValue),
            friend.avatarURL.map { .text($0.absoluteString) } ?? .null,
            .real(friend.updatedAt.timeIntervalSince1970),
        ]
        return values
    }
}
