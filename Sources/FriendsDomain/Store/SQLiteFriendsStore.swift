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
///
/// The file deleted or replaced while the store has it open (a cache cleaner, a restored backup) is noticed by the
/// next write, which closes the old file, opens (or creates) what is at the path now, writes there, and tells
/// `onFileChanged`: the data saved after that is never lost to an unlinked file.
/// ```swift
/// let database = SQLiteFriendsStore(fileURL: applicationSupport.appendingPathComponent("friends.sqlite"))
/// ```
public final class SQLiteFriendsStore: FriendsStore {
    /// The schema version this code writes.
    static let currentVersion = 3

    /// The database file was deleted or replaced while the store had it open; the write that noticed it went to
    /// what is at the path now.
    public struct FileChanged: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// What happened to the file.
        public enum Change: Sendable, Equatable {
            /// Nothing is at the path any more: a new database was created there.
            case deleted
            /// Another file is at the path: it is used from now on.
            case replaced
        }

        /// What happened to the file.
        public let change: Change
        /// The database file's path.
        public let path: String

        public var description: String {
            switch change {
            case .deleted: "The database file at \(path) was deleted while open; a new one was created."
            case .replaced: "The database file at \(path) was replaced while open; the new file is used."
            }
        }

        /// The same text as ``description``.
        public var errorDescription: String? { description }
    }

    private let path: String
    private let targetVersion: Int
    private let connection: QueueConfined<SQLiteConnection?>
    /// The device and inode of the file the connection opened, to notice it being deleted or replaced.
    private let openedFile: QueueConfined<FileIdentity?>
    private let onFileChanged: @Sendable (FileChanged) -> Void
    /// Where completions run, in the order the work was done: never on the database's queue, so that what a caller
    /// does from a completion (a store running the changes that waited for a read) never holds up the work after it.
    private let callbacks: DispatchQueue

    /// Creates a store on the database file at `fileURL` (created if missing); `onFileChanged` is told when a
    /// write finds the file deleted or replaced (see ``FileChanged``).
    public convenience init(fileURL: URL, onFileChanged: @escaping @Sendable (FileChanged) -> Void = { _ in }) {
        self.init(path: fileURL.path, targetVersion: Self.currentVersion, onFileChanged: onFileChanged)
    }

    /// Creates a store on a private in-memory database, gone when the store is: for tests and previews.
    public static func inMemory() -> SQLiteFriendsStore {
        SQLiteFriendsStore(path: ":memory:", targetVersion: currentVersion)
    }

    /// Creates a store that migrates the schema no further than `targetVersion` (tests build old databases so).
    init(path: String, targetVersion: Int, onFileChanged: @escaping @Sendable (FileChanged) -> Void = { _ in }) {
        self.path = path
        self.targetVersion = targetVersion
        self.onFileChanged = onFileChanged
        let queue = DispatchQueue(label: "FriendsDomain.SQLiteFriendsStore")
        connection = QueueConfined(nil, queue: queue)
        openedFile = QueueConfined(nil, queue: queue)
        callbacks = DispatchQueue(label: "FriendsDomain.SQLiteFriendsStore.callbacks")
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
                "SELECT id, name, status, avatar_url, updated_at FROM friend ORDER BY position, rowid",
                operation: "retrieve"
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
        perform(completion, writing: true) { (db: SQLiteConnection) throws(SQLiteError) in
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

    /// Applies `changes` in one transaction: deletes by id, inserts or updates by id (with their positions), moves
    /// (the position alone), then the timestamp. Rows the changes do not name (another process's) are left as they
    /// are.
    public func apply(
        _ changes: FriendsChanges, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        guard !changes.replacesAll else {
            return replaceAll(with: changes.friends, timestamp: timestamp, completion: completion)
        }
        perform(completion, writing: true) { (db: SQLiteConnection) throws(SQLiteError) in
            try db.transaction(operation: "save") { () throws(SQLiteError) in
                for id in changes.deletions {
                    try db.run("DELETE FROM friend WHERE id = ?", [.text(id)], operation: "save")
                }
                for upsert in changes.upserts where changes.keepsOrder {
                    // Places stay: an existing row keeps its place, a new one goes after the last.
                    try db.run(
                        """
                        INSERT INTO friend (id, position, name, status, avatar_url, updated_at)
                        VALUES (?, (SELECT COALESCE(MAX(position), -1) + 1 FROM friend), ?, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET
                            name = excluded.name, status = excluded.status,
                            avatar_url = excluded.avatar_url, updated_at = excluded.updated_at
                        """,
                        Self.values(of: upsert.friend, position: nil), operation: "save")
                }
                for upsert in changes.upserts where !changes.keepsOrder {
                    try db.run(
                        """
                        INSERT INTO friend (id, position, name, status, avatar_url, updated_at)
                        VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET
                            position = excluded.position, name = excluded.name, status = excluded.status,
                            avatar_url = excluded.avatar_url, updated_at = excluded.updated_at
                        """,
                        Self.values(of: upsert.friend, position: Int64(upsert.position)), operation: "save")
                }
                for move in changes.moves {
                    try db.run(
                        "UPDATE friend SET position = ? WHERE id = ?",
                        [.integer(Int64(move.position)), .text(move.friend.id)], operation: "save")
                }
                try Self.stamp(timestamp, in: db, operation: "save")
            }
        }
    }

    public func upsert(
        _ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        perform(completion, writing: true) { (db: SQLiteConnection) throws(SQLiteError) in
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
        perform(completion, writing: true) { (db: SQLiteConnection) throws(SQLiteError) in
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
        perform(completion, writing: true, recovering: recreateUnreadableFile) {
            (db: SQLiteConnection) throws(SQLiteError) in
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
        let (connection, openedFile) = (self.connection, self.openedFile)
        connection.queue.sync {
            connection.withValue { $0 = nil }
            openedFile.withValue { $0 = nil }
        }
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
    /// SQLite error, `recover` (when given) may replace the connection and the outcome. A write (`writing`) first
    /// checks that the file opened is still the one at the path, and opens the path anew when it is not.
    private func perform<Success: Sendable>(
        _ completion: @escaping @Sendable (Result<Success, any Error>) -> Void,
        writing: Bool = false,
        recovering recover: (@Sendable (inout SQLiteConnection?, SQLiteError) -> Result<Success, any Error>?)? = nil,
        _ work: @escaping @Sendable (SQLiteConnection) throws(SQLiteError) -> Success
    ) {
        let (connection, openedFile, onFileChanged) = (self.connection, self.openedFile, self.onFileChanged)
        let (path, targetVersion, callbacks) = (self.path, self.targetVersion, self.callbacks)
        connection.queue.async {
            let changed = writing ? Self.closeIfChanged(connection, openedFile, path: path) : nil
            let result = connection.withValue { db -> Result<Success, any Error> in
                do throws(SQLiteError) {
                    if db == nil {
                        db = try Self.open(path: path, targetVersion: targetVersion)
                        openedFile.withValue { $0 = FileIdentity(path: path) }
                    }
                    return .success(try work(db!))
                } catch {
                    guard let recovered = recover?(&db, error) else { return .failure(error) }
                    openedFile.withValue { $0 = db == nil ? nil : FileIdentity(path: path) }
                    return recovered
                }
            }
            callbacks.async {
                if let changed { onFileChanged(changed) }
                completion(result)
            }
        }
    }

    /// Closes the connection when the file it opened is no longer the one at the path (deleted, or replaced by
    /// another file), so that the next use opens what is there; returns what happened.
    private static func closeIfChanged(
        _ connection: QueueConfined<SQLiteConnection?>, _ openedFile: QueueConfined<FileIdentity?>, path: String
    ) -> FileChanged? {
        guard path != ":memory:", let opened = openedFile.withValue({ $0 }) else { return nil }
        let current = FileIdentity(path: path)
        guard current != opened else { return nil }
        // The -wal file is named after the path, not the file: what this connection wrote there belongs to the old
        // file and must not be replayed into the one at the path now. Checkpointed into the old file and emptied.
        connection.withValue { db in
            try? db?.execute("PRAGMA wal_checkpoint(TRUNCATE)", operation: "close")
            db = nil
        }
        openedFile.withValue { $0 = nil }
        if current == nil {
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        return FileChanged(change: current == nil ? .deleted : .replaced, path: path)
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
        // A friend added at the end finds the last place through this index, not by reading every row: without
        // it, saving a list of n new friends in order read the table n times.
        """
        CREATE INDEX friend_position ON friend (position);
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

/// Which file a path names: its device and inode (a file deleted and created anew, or replaced by a rename, has
/// another).
private struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// The identity of the file at `path`; `nil` when there is none.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
