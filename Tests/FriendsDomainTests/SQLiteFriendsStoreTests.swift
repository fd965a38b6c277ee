import Foundation
import Loading
import XCTest

@testable import FriendsDomain

/// What only the SQLite store has to prove: bad files give typed errors and lose nothing, writes are atomic,
/// data survives a restart, and old schemas migrate.
final class SQLiteFriendsStoreTests: XCTestCase {
    private var url: URL!

    override func setUp() {
        super.setUp()
        url = temporaryFileURL()
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    }

    override func tearDown() {
        makeWritable(url)
        try? FileManager.default.removeItem(at: url.deletingLastPathComponent())
        super.tearDown()
    }

    func test_fileThatIsNotADatabase_deliversTypedErrorAndIsNotOverwritten() throws {
        let garbage = Data(repeating: 0x42, count: 8_192)
        try garbage.write(to: url)
        let sut = SQLiteFriendsStore(fileURL: url)

        let retrieved = awaitResult { sut.retrieve(completion: $0) }
        let written = awaitResult { sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }

        XCTAssertTrue(sqliteError(retrieved)?.isNotADatabase == true, "\(String(describing: retrieved))")
        XCTAssertTrue(sqliteError(written)?.isNotADatabase == true, "\(String(describing: written))")
        XCTAssertEqual(try Data(contentsOf: url), garbage, "a bad file is never overwritten")
    }

    func test_readOnlyFile_deliversTypedErrorOnWriteAndLosesNothing() throws {
        let original = [makeFriend("1"), makeFriend("2")]
        let writer = SQLiteFriendsStore(fileURL: url)
        XCTAssertNoThrow(
            try awaitResult { writer.replaceAll(with: original, timestamp: fixedDate, completion: $0) }?.get())
        writer.closeConnection()
        try makeReadOnly(url)

        let sut = SQLiteFriendsStore(fileURL: url)
        let written = awaitResult { sut.replaceAll(with: [makeFriend("3")], timestamp: fixedDate, completion: $0) }
        let deleted = awaitResult { sut.deleteAll(completion: $0) }
        sut.closeConnection()

        XCTAssertNotNil(
            sqliteError(written),
            "a write to a read-only file must fail with an SQLiteError: \(String(describing: written))")
        XCTAssertNotNil(sqliteError(deleted), "\(String(describing: deleted))")
        makeWritable(url)
        let reopened = SQLiteFriendsStore(fileURL: url)
        XCTAssertEqual(try awaitResult { reopened.retrieve(completion: $0) }?.get()?.friends, original)
    }

    func test_failedWrite_rollsBackAndLeavesPreviousRowsIntact() {
        let sut = SQLiteFriendsStore(fileURL: url)
        let original = [makeFriend("1"), makeFriend("2")]
        _ = awaitResult { sut.replaceAll(with: original, timestamp: fixedDate, completion: $0) }

        // A trigger makes the second insert fail halfway through the transaction.
        XCTAssertNoThrow(
            try sut.executeForTesting(
                "CREATE TEMP TRIGGER boom BEFORE INSERT ON friend WHEN NEW.id = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END"
            ))
        let failed = awaitResult {
            sut.replaceAll(
                with: [makeFriend("3"), makeFriend("boom")], timestamp: fixedDate.addingTimeInterval(9), completion: $0)
        }

        XCTAssertEqual(
            sqliteError(failed)?.primaryCode, 19, "SQLITE_CONSTRAINT expected: \(String(describing: failed))")
        XCTAssertEqual(
            try awaitResult { sut.retrieve(completion: $0) }?.get(),
            CachedFriends(friends: original, timestamp: fixedDate))
    }

    func test_dataSurvivesANewStoreOnTheSameFile() {
        let friends = [makeFriend("1")]
        let first = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult { first.replaceAll(with: friends, timestamp: fixedDate, completion: $0) }
        first.closeConnection()

        let second = SQLiteFriendsStore(fileURL: url)

        XCTAssertEqual(try awaitResult { second.retrieve(completion: $0) }?.get()?.friends, friends)
    }

    func test_usesWriteAheadLogging() {
        let sut = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult { sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: url.path + "-wal"))
    }

    func test_migratesAVersionOneDatabaseKeepingItsRows() throws {
        let old = SQLiteFriendsStore(path: url.path, targetVersion: 1)
        _ = awaitResult { old.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }
        XCTAssertEqual(try old.schemaVersion(), 1)
        old.closeConnection()

        let sut = SQLiteFriendsStore(fileURL: url)

        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, [makeFriend("1")])
        XCTAssertEqual(try sut.schemaVersion(), SQLiteFriendsStore.currentVersion)
    }

    func test_aFriendAddedAtTheEnd_findsTheLastPlaceThroughAnIndex_notByReadingEveryRow() throws {
        let sut = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult { sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }
        let db = try SQLiteConnection(path: url.path)
        var plan: [String] = []
        try db.run("EXPLAIN QUERY PLAN SELECT COALESCE(MAX(position), -1) + 1 FROM friend", operation: "plan") { row in
            plan.append(row.text(3) ?? "")
        }

        XCTAssertTrue(plan.contains { $0.contains("USING") && $0.contains("INDEX") }, "read through an index: \(plan)")
    }

    func test_valuesAreBoundNeverSplicedIntoSQL() {
        let sut = SQLiteFriendsStore(fileURL: url)
        let tricky = makeFriend("1'); DROP TABLE friend; --", name: "Robert'); DROP TABLE friend;--")
        _ = awaitResult { sut.replaceAll(with: [tricky, makeFriend("2")], timestamp: fixedDate, completion: $0) }
        _ = awaitResult { sut.delete(id: "2' OR '1'='1", completion: $0) }

        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, [tricky, makeFriend("2")])
    }

    func test_textWithNULCharacters_isStoredWhole_andIdsDifferingAfterANULStayDistinct() {
        let sut = SQLiteFriendsStore(fileURL: url)
        let friends = [
            makeFriend("a\0x", name: "Ada\0Lovelace"), makeFriend("a\0y", name: "\0"), makeFriend("", name: ""),
        ]

        XCTAssertNoThrow(try awaitResult { sut.replaceAll(with: friends, timestamp: fixedDate, completion: $0) }?.get())

        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, friends)
    }

    func test_twoStoresOpeningANewFileAtOnce_bothWrite() {
        for trial in 0..<20 {
            let file = url.deletingLastPathComponent().appendingPathComponent("race-\(trial).sqlite")
            let stores = [SQLiteFriendsStore(fileURL: file), SQLiteFriendsStore(fileURL: file)]
            let results = Locked<[Result<Void, any Error>]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let done = DispatchSemaphore(value: 0)
                stores[index].replaceAll(with: [makeFriend("\(index)")], timestamp: fixedDate) { result in
                    results.withLock { $0.append(result) }
                    done.signal()
                }
                done.wait()
            }
            for result in results.withLock({ $0 }) {
                XCTAssertNoThrow(try result.get(), "trial \(trial)")
            }
        }
    }

    func test_unreadableDatabase_isDeletedAndRecreatedByDeleteAll_soTheCacheHeals() throws {
        let writer = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult {
            writer.replaceAll(with: (0..<500).map { makeFriend("\($0)") }, timestamp: fixedDate, completion: $0)
        }
        writer.closeConnection()
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        let whole = try Data(contentsOf: url)
        for damaged in [Data(repeating: 0x42, count: 8_192), whole.prefix(100), whole.prefix(whole.count / 2)] {
            try damaged.write(to: url)
            let sut = SQLiteFriendsStore(fileURL: url)
            let loader = LocalFriendsLoader(store: sut)

            _ = awaitResult { loader.validateCache(completion: $0) }

            XCTAssertNoThrow(
                try awaitResult { sut.replaceAll(with: [makeFriend("new")], timestamp: fixedDate, completion: $0) }?
                    .get())
            XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, [makeFriend("new")])
            sut.closeConnection()
        }
    }

    func test_readOnlyFile_canStillBeRead() throws {
        let original = [makeFriend("1"), makeFriend("2")]
        let writer = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult { writer.replaceAll(with: original, timestamp: fixedDate, completion: $0) }
        writer.closeConnection()
        try makeReadOnly(url)

        let sut = SQLiteFriendsStore(fileURL: url)

        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, original)
        let written = awaitResult { sut.replaceAll(with: [makeFriend("3")], timestamp: fixedDate, completion: $0) }
        XCTAssertEqual(sqliteError(written)?.isReadOnly, true, "\(String(describing: written))")
        sut.closeConnection()
    }

    func test_databaseInAReadOnlyFolder_canBeRead_andWritesFailAsReadOnly() throws {
        let original = [makeFriend("1"), makeFriend("2")]
        let writer = SQLiteFriendsStore(fileURL: url)
        _ = awaitResult { writer.replaceAll(with: original, timestamp: fixedDate, completion: $0) }
        writer.closeConnection()
        let folder = url.deletingLastPathComponent()
        try makeReadOnly(folder)  // a seed database in the app's bundle: no -wal or -shm file can be made beside it
        addTeardownBlock { [self] in makeWritable(folder) }

        let sut = SQLiteFriendsStore(fileURL: url)

        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, original)
        let written = awaitResult { sut.replaceAll(with: [makeFriend("3")], timestamp: fixedDate, completion: $0) }
        XCTAssertEqual(sqliteError(written)?.isReadOnly, true, "\(String(describing: written))")
        XCTAssertEqual(try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, original, "left intact")
        sut.closeConnection()
    }

    func test_fileDeletedWhileOpen_theNextWriteCreatesItAnew_andSaysSo() throws {
        let changes = Locked<[SQLiteFriendsStore.FileChanged]>([])
        let sut = SQLiteFriendsStore(fileURL: url) { change in changes.withLock { $0.append(change) } }
        XCTAssertNoThrow(
            try awaitResult { sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }?.get())
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }

        XCTAssertNoThrow(
            try awaitResult { sut.replaceAll(with: [makeFriend("2")], timestamp: fixedDate, completion: $0) }?.get())

        XCTAssertEqual(changes.withLock { $0 }.map(\.change), [.deleted])
        let reopened = SQLiteFriendsStore(fileURL: url)
        XCTAssertEqual(
            try awaitResult { reopened.retrieve(completion: $0) }?.get()?.friends, [makeFriend("2")],
            "saved to the file at the path, not to the deleted one")
        reopened.closeConnection()
        sut.closeConnection()
    }

    func test_fileReplacedWhileOpen_theNextWriteGoesToTheNewFile() throws {
        let changes = Locked<[SQLiteFriendsStore.FileChanged]>([])
        let sut = SQLiteFriendsStore(fileURL: url) { change in changes.withLock { $0.append(change) } }
        XCTAssertNoThrow(
            try awaitResult { sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate, completion: $0) }?.get())
        let backupURL = url.deletingLastPathComponent().appendingPathComponent("backup.sqlite")
        let backup = SQLiteFriendsStore(fileURL: backupURL)
        _ = awaitResult { backup.replaceAll(with: [makeFriend("b")], timestamp: fixedDate, completion: $0) }
        backup.closeConnection()
        XCTAssertEqual(rename(backupURL.path, url.path), 0, "a backup restored over the file")

        XCTAssertNoThrow(try awaitResult { sut.upsert(makeFriend("3"), timestamp: fixedDate, completion: $0) }?.get())

        XCTAssertEqual(changes.withLock { $0 }.map(\.change), [.replaced])
        XCTAssertEqual(
            try awaitResult { sut.retrieve(completion: $0) }?.get()?.friends, [makeFriend("b"), makeFriend("3")])
        sut.closeConnection()
    }

    func test_aFileLeftInPlace_isNeverReportedChanged() throws {
        let changes = Locked<[SQLiteFriendsStore.FileChanged]>([])
        let sut = SQLiteFriendsStore(fileURL: url) { change in changes.withLock { $0.append(change) } }

        for index in 0..<3 {
            _ = awaitResult { sut.replaceAll(with: [makeFriend("\(index)")], timestamp: fixedDate, completion: $0) }
            _ = awaitResult { sut.deleteAll(completion: $0) }
        }

        XCTAssertEqual(changes.withLock { $0 }, [])
        sut.closeConnection()
    }

    // MARK: - Helpers

    private func sqliteError<T>(_ result: Result<T, any Error>?) -> SQLiteError? {
        guard case .failure(let error) = result else { return nil }
        return error as? SQLiteError
    }

    /// Makes the file read-only even for root (tests run as root here): the immutable attribute when `chattr`
    /// works, otherwise plain permissions.
    private func makeReadOnly(_ url: URL) throws {
        let isFolder = (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true
        try FileManager.default.setAttributes([.posixPermissions: isFolder ? 0o555 : 0o444], ofItemAtPath: url.path)
        if getuid() == 0 {
            guard run("/usr/bin/chattr", ["+i", url.path]) == 0 else {
                throw XCTSkip("running as root without chattr: a read-only file cannot be simulated here")
            }
        }
    }

    private func makeWritable(_ url: URL) {
        if getuid() == 0, FileManager.default.fileExists(atPath: url.path) {
            _ = run("/usr/bin/chattr", ["-i", url.path])
        }
        let isFolder = (try? url.resourceValues(forKeys: [.isDirectoryKey]).isDirectory) == true
        try? FileManager.default.setAttributes([.posixPermissions: isFolder ? 0o755 : 0o644], ofItemAtPath: url.path)
    }

    private func run(_ tool: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
