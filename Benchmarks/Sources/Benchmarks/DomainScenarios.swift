import Dispatch
import Foundation
import FriendsDomain
import Loading

#if canImport(SQLite3)
    import SQLite3
#else
    import CSQLiteBench
#endif

func sampleFriends(_ count: Int) -> [Friend] {
    (0..<count).map { index in
        Friend(
            id: "u\(index)", name: "Friend number \(index)", status: index.isMultiple(of: 3) ? .online : .offline,
            avatarURL: URL(string: "https://avatars.example/\(index).png"),
            updatedAt: Date(timeIntervalSince1970: 1_795_000_000 + Double(index)))
    }
}

/// Scenario 4: a memory hit through the whole FriendsComposer chain, against reading the store directly.
func composerMemoryHitScenario(loads: Int) -> Scenario {
    let friends = sampleFriends(100)
    let memory = InMemoryFriendsStore(CachedFriends(friends: friends, timestamp: Date()))
    let composer = FriendsComposer(
        memoryStore: memory, databaseStore: InMemoryFriendsStore(), remote: AnyLoader { throw BenchmarkError() },
        maxAge: .seconds(300))
    let chain = composer.friendsLoader
    let counted = Tally()
    func checksum() -> Int {
        defer { counted.value = 0 }
        return counted.value
    }
    let direct = Variant(name: "InMemoryFriendsStore.retrieve") { count in
        for _ in 0..<count {
            memory.retrieve { result in counted.value &+= ((try? result.get()) ?? nil)?.friends.count ?? 0 }
        }
        return checksum()
    }
    let composed = Variant(name: "FriendsComposer.friendsLoader") { count in
        for _ in 0..<count {
            chain.load { result in counted.value &+= (try? result.get())?.count ?? 0 }
        }
        return checksum()
    }
    return Scenario(
        title: "4. Memory hit through the full FriendsComposer chain",
        unit: "loads", operations: loads, reference: "InMemoryFriendsStore.retrieve",
        variants: [direct, composed],
        targets: [
            .instructions(
                "FriendsComposer.friendsLoader", atMost: 3, of: "InMemoryFriendsStore.retrieve",
                label: "memory hit through FriendsComposer.friendsLoader, instructions vs the store read")
        ],
        expectedChecksum: { $0 &* 100 },
        note: "memory (max age 5 min) -> fallbacks -> main-queue dispatch, called on the main queue (delivered inline)")
}

/// Scenario 5: SQLite, replace all and read all, through the store and through the raw C API.
func sqliteScenarios(rows: Int, folder: URL) -> [Scenario] {
    let friends = sampleFriends(rows)
    let store = SQLiteFriendsStore(fileURL: folder.appendingPathComponent("store.sqlite"))
    let raw = RawSQLite(path: folder.appendingPathComponent("raw.sqlite").path)
    func wait<T>(_ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) -> T {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<Result<T, any Error>>()
        start { result in
            box.value = result
            done.signal()
        }
        done.wait()
        return try! box.value!.get()
    }
    let stamp = Date()
    let replaceStore = Variant(name: "SQLiteFriendsStore") { count in
        for _ in 0..<count { wait { store.replaceAll(with: friends, timestamp: stamp, completion: $0) } }
        return count
    }
    let replaceRaw = Variant(name: "raw sqlite3 C API") { count in
        for _ in 0..<count { raw.replaceAll(friends, timestamp: stamp) }
        return count
    }
    let readStore = Variant(name: "SQLiteFriendsStore") { count in
        var total = 0
        for _ in 0..<count { total &+= wait { store.retrieve(completion: $0) }?.friends.count ?? 0 }
        return total
    }
    let readRaw = Variant(name: "raw sqlite3 C API") { count in
        var total = 0
        for _ in 0..<count { total &+= raw.readAll().count }
        return total
    }
    // The same raw loop run on a serial queue while the caller waits, as the store runs: the thread hop on its own.
    let rawQueue = DispatchQueue(label: "raw-sqlite")
    let readRawOnQueue = Variant(name: "raw C API on a serial queue") { count in
        var total = 0
        for _ in 0..<count {
            let done = DispatchSemaphore(value: 0)
            let box = ResultBox<[Friend]>()
            rawQueue.async {
                box.value = raw.readAll()
                done.signal()
            }
            done.wait()
            total &+= box.value!.count
        }
        return total
    }
    let replaceRawOnQueue = Variant(name: "raw C API on a serial queue") { count in
        for _ in 0..<count {
            let done = DispatchSemaphore(value: 0)
            rawQueue.async {
                raw.replaceAll(friends, timestamp: stamp)
                done.signal()
            }
            done.wait()
        }
        return count
    }
    return [
        Scenario(
            title: "5a. SQLite: replace all \(Report.count(rows)) friends in one transaction",
            unit: "replacements", operations: 1, reference: "raw sqlite3 C API",
            variants: [replaceRaw, replaceRawOnQueue, replaceStore],
            targets: [
                .instructions(
                    "SQLiteFriendsStore", atMost: 1.15, of: "raw sqlite3 C API",
                    label: "SQLite replace-all through SQLiteFriendsStore, instructions vs the raw C API")
            ],
            expectedChecksum: { $0 }, note: "same schema, WAL, one prepared statement, values bound",
            countedOperations: 5),
        Scenario(
            title: "5b. SQLite: read all \(Report.count(rows)) friends back",
            unit: "reads", operations: 1, reference: "raw sqlite3 C API",
            variants: [readRaw, readRawOnQueue, readStore],
            targets: [
                .instructions(
                    "SQLiteFriendsStore", atMost: 1.15, of: "raw sqlite3 C API",
                    label: "SQLite read-all through SQLiteFriendsStore, instructions vs the raw C API")
            ],
            expectedChecksum: { $0 &* rows }, countedOperations: 5,
            prepare: {
                // Both databases hold the friends (a full run writes them in 5a first; a counting child runs alone).
                _ = replaceRaw.run(1)
                _ = replaceStore.run(1)
            }),
    ]
}

/// The baseline: the raw sqlite3 C API, one connection, one prepared statement per query, the store's schema.
final class RawSQLite: @unchecked Sendable {
    private var db: OpaquePointer?
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String) {
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        sqlite3_exec(db, "PRAGMA journal_mode = WAL", nil, nil, nil)
        sqlite3_exec(
            db,
            """
            CREATE TABLE IF NOT EXISTS friend (id TEXT PRIMARY KEY NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL,
                status TEXT NOT NULL, avatar_url TEXT, updated_at REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS cache_info (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), saved_at REAL NOT NULL);
            CREATE INDEX IF NOT EXISTS friend_updated_at ON friend (updated_at);
            CREATE INDEX IF NOT EXISTS friend_position ON friend (position);
            """, nil, nil, nil)
    }

    func replaceAll(_ friends: [Friend], timestamp: Date) {
        sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
        sqlite3_exec(db, "DELETE FROM friend", nil, nil, nil)
        var insert: OpaquePointer?
        sqlite3_prepare_v2(
            db, "INSERT INTO friend (id, position, name, status, avatar_url, updated_at) VALUES (?, ?, ?, ?, ?, ?)", -1,
            &insert, nil)
        for (position, friend) in friends.enumerated() {
            sqlite3_bind_text(insert, 1, friend.id, -1, transient)
            sqlite3_bind_int64(insert, 2, Int64(position))
            sqlite3_bind_text(insert, 3, friend.name, -1, transient)
            sqlite3_bind_text(insert, 4, friend.status.rawValue, -1, transient)
            if let url = friend.avatarURL {
                sqlite3_bind_text(insert, 5, url.absoluteString, -1, transient)
            } else {
                sqlite3_bind_null(insert, 5)
            }
            sqlite3_bind_double(insert, 6, friend.updatedAt.timeIntervalSince1970)
            guard sqlite3_step(insert) == SQLITE_DONE else { fatalError("insert failed") }
            sqlite3_reset(insert)
        }
        sqlite3_finalize(insert)
        var stamp: OpaquePointer?
        sqlite3_prepare_v2(
            db,
            "INSERT INTO cache_info (singleton, saved_at) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET saved_at = excluded.saved_at",
            -1, &stamp, nil)
        sqlite3_bind_double(stamp, 1, timestamp.timeIntervalSince1970)
        sqlite3_step(stamp)
        sqlite3_finalize(stamp)
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
    }

    func readAll() -> [Friend] {
        var select: OpaquePointer?
        sqlite3_prepare_v2(
            db, "SELECT id, name, status, avatar_url, updated_at FROM friend ORDER BY position", -1, &select, nil)
        defer { sqlite3_finalize(select) }
        var friends: [Friend] = []
        while sqlite3_step(select) == SQLITE_ROW {
            friends.append(
                Friend(
                    id: String(cString: sqlite3_column_text(select, 0)),
                    name: String(cString: sqlite3_column_text(select, 1)),
                    status: Friend.Status(rawValue: String(cString: sqlite3_column_text(select, 2))),
                    avatarURL: sqlite3_column_text(select, 3).flatMap { URL(string: String(cString: $0)) },
                    updatedAt: Date(timeIntervalSince1970: sqlite3_column_double(select, 4))))
        }
        return friends
    }
}

/// Scenario 6: many concurrent network reads of one key of a store, which share one fetch, against a load per call.
/// The source holds every load until all callers have called (as a slow network would), then answers.
func concurrencyScenario(callers: Int) -> Scenario {
    let held = HeldBatchSource()
    let source = held.loader
    let store = Store<Int, Int>(levels: [], fetch: LoaderFamily { _ in source })
    let read = store.read(0, policy: .networkOnly)
    return coalescingScenario(
        title: "6. Concurrency: \(Report.count(callers)) concurrent load() calls, delivered to all", callers: callers,
        separate: ("a load per call", { source.load(completion: $0) }),
        shared: (
            "Store.read, network only (coalescing)",
            { completion in read.load { completion($0.map { $0.value ?? 0 }) } }
        ), source: held)
}

extension Scenario {
    /// The scenario with each "operation" being one batch of `callers` calls (the checksum counts deliveries).
    func withOperations(_ callers: Int) -> Scenario {
        Scenario(
            title: title, unit: unit, operations: 1, reference: reference,
            variants: variants.map { variant in
                Variant(name: variant.name) { batches in
                    var delivered = 0
                    for _ in 0..<batches { delivered += variant.run(callers) }
                    return delivered / max(batches, 1)
                }
            },
            targets: targets, expectedChecksum: { _ in callers }, note: note, countedOperations: 0)
    }
}
