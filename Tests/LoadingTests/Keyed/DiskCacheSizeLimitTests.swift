import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import XCTest

/// A disk cache with a size limit keeps the most recently used entries within it, on real files: the order of use
/// survives a new cache over the directory, a clock set back and a process killed mid-write.
final class DiskCacheSizeLimitTests: XCTestCase {
    private typealias Cache = DiskCache<Int, String>

    private var directory: URL!
    /// The size of one entry's file: every value below has the same length and the clock the same date, so every
    /// entry takes the same bytes.
    private var entrySize = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("DiskCacheSize-\(UUID().uuidString)")
        let probe = directory.appendingPathComponent("probe")
        save("v", for: 0, to: DiskCache<Int, String>(directory: probe, now: { Self.date }))
        entrySize = try XCTUnwrap(Self.entrySizes(in: probe).first)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
        super.tearDown()
    }

    func test_theLeastRecentlyUsedEntriesGo_onceTheLimitIsExceeded_aReadCountingAsAUse() {
        let cache = makeCache(holding: 3)
        for key in 1...3 { save("v", for: key, to: cache) }
        XCTAssertEqual(read(1, from: cache), "v")

        save("v", for: 4, to: cache)

        XCTAssertEqual(keysHeld(by: cache), [1, 3, 4], "2 was used least recently")
        XCTAssertEqual(Self.entrySizes(in: directory).reduce(0, +), 3 * entrySize)
    }

    func test_theOrderOfUse_survivesANewCacheOverTheDirectory() {
        let first = makeCache(holding: 3)
        for key in 1...3 { save("v", for: key, to: first) }
        XCTAssertEqual(read(1, from: first), "v")

        let relaunched = makeCache(holding: 3)
        save("v", for: 4, to: relaunched)

        XCTAssertEqual(keysHeld(by: relaunched), [1, 3, 4])
    }

    func test_entriesFoundInTheDirectory_countTowardTheLimit() {
        let unlimited = DiskCache<Int, String>(directory: directory, now: { Self.date })
        for key in 1...5 { save("v", for: key, to: unlimited) }

        save("v", for: 6, to: makeCache(holding: 3))

        XCTAssertEqual(Self.entrySizes(in: directory).count, 3)
        XCTAssertTrue(keysHeld(by: makeCache(holding: 3)).contains(6), "the entry just saved stays")
    }

    func test_aClockSetBack_doesNotMakeARecentUseLookOld_inThisCacheNorInTheNext() {
        let clock = Locked(Self.date)
        let cache = makeCache(holding: 3, now: { clock.withLock { $0 } })
        for key in 1...3 { save("v", for: key, to: cache) }
        clock.withLock { $0 = Self.date.addingTimeInterval(-86_400) }  // a day back
        XCTAssertEqual(read(1, from: cache), "v")

        save("v", for: 4, to: cache)
        XCTAssertEqual(Self.keysOnDisk(in: directory, of: [1, 2, 3, 4]), [1, 3, 4], "1 was used after 3")

        save("v", for: 5, to: makeCache(holding: 3, now: { clock.withLock { $0 } }))
        XCTAssertEqual(Self.keysOnDisk(in: directory, of: [1, 3, 4, 5]), [1, 4, 5], "after a relaunch too")
    }

    func test_aValueLargerThanTheLimitOnItsOwn_isNotKept_andTheKeysOlderValueGoes() {
        let cache = makeCache(holding: 2)
        save("v", for: 1, to: cache)
        save("v", for: 2, to: cache)

        save(String(repeating: "x", count: 3 * entrySize), for: 1, to: cache)

        XCTAssertNil(read(1, from: cache), "not the value the save replaced")
        XCTAssertEqual(read(2, from: cache), "v", "and nothing else is evicted for it")
    }

    func test_removals_freeTheirSpace() {
        let cache = makeCache(holding: 2)
        save("v", for: 1, to: cache)
        save("v", for: 2, to: cache)
        remove(1, from: cache)

        save("v", for: 3, to: cache)

        XCTAssertEqual(keysHeld(by: cache), [2, 3])
    }

    func test_aProcessKilledWhileSavingAndReading_leavesACacheThatStaysWithinItsLimit() throws {
        let said = try runChildUntilKilled(
            "DiskCacheSizeLimitChild/test_runsWhenStartedByTheKillTest",
            environment: [
                DiskCacheSizeLimitChild.directoryVariable: directory.path,
                DiskCacheSizeLimitChild.limitVariable: "\(5 * entrySize)",
            ])
        XCTAssertEqual(said, "busy")

        let relaunched = makeCache(holding: 5)
        for key in DiskCacheSizeLimitChild.keys { _ = read(key, from: relaunched) }  // a value or a miss, never a crash
        save("v", for: 100, to: relaunched)

        XCTAssertLessThanOrEqual(Self.entrySizes(in: directory).reduce(0, +), 5 * entrySize)
        XCTAssertLessThanOrEqual(Self.bytesInFolder(directory), 5 * entrySize, "temporary files included")
        XCTAssertEqual(read(100, from: relaunched), "v")
    }

    func test_aSaveThatADeadProcessLeftUnfinished_isRemovedWhenACacheOpens() throws {
        let leftover = try leaveAnUnfinishedSave(ofSize: 2 * entrySize)
        let cache = makeCache(holding: 3)

        for key in 1...3 { save("v", for: key, to: cache) }

        XCTAssertFalse(FileManager.default.fileExists(atPath: leftover.path), "the dead process's file is gone")
        XCTAssertEqual(keysHeld(by: cache), [1, 2, 3])
        XCTAssertLessThanOrEqual(Self.bytesInFolder(directory), 3 * entrySize)
    }

    func test_aSaveUnderWayInAnotherProcess_isLeftAlone_andCountsAgainstTheLimit() throws {
        let unfinished = try leaveAnUnfinishedSave(ofSize: 2 * entrySize)
        // A live process holds the lock its saves hold while it writes; it is this test here.
        let writer = try XCTUnwrap(Self.holdTheSavesLock(in: directory))
        let cache = makeCache(holding: 3)

        for key in 1...3 { save("v", for: key, to: cache) }

        XCTAssertTrue(FileManager.default.fileExists(atPath: unfinished.path), "a live process's file is kept")
        XCTAssertLessThanOrEqual(Self.bytesInFolder(directory), 3 * entrySize, "the file counts against the limit")
        XCTAssertEqual(keysHeld(by: cache), [3], "the two least recently used entries made room for it")

        close(writer)  // the writer ended (its process died mid-write)
        save("v", for: 4, to: cache)
        XCTAssertFalse(FileManager.default.fileExists(atPath: unfinished.path), "removed at the next save")
        XCTAssertEqual(keysHeld(by: cache), [3, 4])
    }

    // MARK: - Helpers

    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// Writes what a process killed in the middle of a save leaves: a temporary file beside an entry's.
    private func leaveAnUnfinishedSave(ofSize size: Int) throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("00000000000000aa.entry.\(UUID().uuidString).writing")
        try Data(repeating: 0x20, count: size).write(to: file)
        return file
    }

    /// Takes, as a save in progress does, the directory's lock shared; the descriptor to close to release it.
    private static func holdTheSavesLock(in directory: URL) -> Int32? {
        let descriptor = open(directory.appendingPathComponent(".lock").path, O_RDWR | O_CREAT, 0o644)
        guard descriptor >= 0, flock(descriptor, LOCK_SH) == 0 else { return nil }
        return descriptor
    }

    /// The bytes of every file in `directory`.
    private static func bytesInFolder(_ directory: URL) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.reduce(0) { total, name in
            total + ((try? Data(contentsOf: directory.appendingPathComponent(name)))?.count ?? 0)
        }
    }

    private func makeCache(holding entries: Int, now: @escaping @Sendable () -> Date = { date }) -> Cache {
        Cache(directory: directory, sizeLimit: entries * entrySize, now: now)
    }

    /// The keys 1 to 9 whose values `cache` holds (reading them, in order, counts as uses).
    private func keysHeld(by cache: Cache) -> [Int] {
        (1...9).filter { read($0, from: cache) != nil }
    }

    /// Which of `keys` have a file in `directory`, without using any (a cache with no limit reads them).
    private static func keysOnDisk(in directory: URL, of keys: [Int]) -> [Int] {
        let reader = DiskCache<Int, String>(directory: directory, now: { date })
        return keys.filter { key in
            let found = Locked(false)
            let done = DispatchSemaphore(value: 0)
            reader.value(for: key) { result in
                found.withLock { $0 = (try? result.get()) != nil }
                done.signal()
            }
            done.wait()
            return found.withLock { $0 }
        }
    }

    static func entrySizes(in directory: URL) -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".entry") }.compactMap { name in
            let url = directory.appendingPathComponent(name)
            return (try? Data(contentsOf: url))?.count
        }
    }

    private func save(_ value: String, for key: Int, to cache: Cache) {
        let done = expectation(description: "save")
        cache.save(value, for: key) { result in
            if case .failure(let error) = result { XCTFail("save failed: \(error)") }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
    }

    private func remove(_ key: Int, from cache: Cache) {
        let done = expectation(description: "remove")
        cache.removeValue(for: key) { _ in done.fulfill() }
        wait(for: [done], timeout: .watchdog)
    }

    private func read(_ key: Int, from cache: Cache) -> String? {
        let outcome = Locked<String?>(nil)
        let done = expectation(description: "read")
        cache.value(for: key) { result in
            outcome.withLock { $0 = try? result.get().value }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return outcome.withLock { $0 }
    }
}

/// The child side of ``DiskCacheSizeLimitTests``: saves and reads without end, and is killed in the middle.
final class DiskCacheSizeLimitChild: XCTestCase {
    static let directoryVariable = "LOADING_KILL_DISK_CACHE"
    static let limitVariable = "LOADING_KILL_DISK_LIMIT"
    static let keys = Array(0..<20)

    func test_runsWhenStartedByTheKillTest() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = environment[Self.directoryVariable],
            let limit = environment[Self.limitVariable].flatMap(Int.init)
        else { throw XCTSkip("the child process of DiskCacheSizeLimitTests: it runs only when that test starts it") }
        let cache = DiskCache<Int, String>(
            directory: URL(fileURLWithPath: path), sizeLimit: limit, now: { DiskCacheSizeLimitTests.date })
        var round = 0
        while true {
            let key = Self.keys[round % Self.keys.count]
            let done = DispatchSemaphore(value: 0)
            if round % 3 == 2 {
                cache.value(for: (key * 7) % Self.keys.count) { _ in done.signal() }
            } else {
                cache.save("v", for: key) { _ in done.signal() }
            }
            done.wait()
            round += 1
            // Said once, then the saves and reads go on: the kill lands in the middle of one.
            if round == 200 { sayKillNow("busy") }
        }
    }
}
