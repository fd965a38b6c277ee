import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

final class MemoryCacheTests: XCTestCase {
    func test_keyedCacheContract() {
        KeyedCacheContract(keys: ("a", "b"), sampleValues: (1, 2)) { expiry, now in
            MemoryCache<String, Int>(expiry: expiry, now: now)
        }.verify()
    }

    func test_countLimit_evictsTheLeastRecentlyUsedFirst() {
        let cache = MemoryCache<String, Int>(countLimit: 2)
        cache.insert(1, for: "a")
        cache.insert(2, for: "b")
        _ = cache.cachedValue(for: "a")  // a is now the most recently used
        cache.insert(3, for: "c")

        XCTAssertEqual(try? cache.cachedValue(for: "a").get().value, 1)
        XCTAssertEqual(cache.cachedValue(for: "b").failure, .absent, "b was the least recently used")
        XCTAssertEqual(try? cache.cachedValue(for: "c").get().value, 3)
        XCTAssertEqual(cache.count, 2)
    }

    func test_costLimit_evictsUntilTheTotalFits_andRefusesAValueTooCostlyAlone() {
        let cache = MemoryCache<String, [Int]>(costLimit: 10, cost: { $0.count })
        cache.insert(Array(repeating: 0, count: 4), for: "a")
        cache.insert(Array(repeating: 0, count: 4), for: "b")
        cache.insert(Array(repeating: 0, count: 4), for: "c")

        XCTAssertEqual(cache.cachedValue(for: "a").failure, .absent)
        XCTAssertEqual(cache.totalCost, 8)

        cache.insert(Array(repeating: 0, count: 11), for: "huge")
        XCTAssertEqual(cache.cachedValue(for: "huge").failure, .absent)
        XCTAssertEqual(cache.totalCost, 8)
    }

    func test_replacingAValue_keepsTheCostRight() {
        let cache = MemoryCache<String, [Int]>(costLimit: 10, cost: { $0.count })
        cache.insert([1, 2, 3], for: "a")
        cache.insert([1], for: "a")

        XCTAssertEqual(cache.totalCost, 1)
        XCTAssertEqual(cache.count, 1)
    }

    func test_replacingAValueWithACostlierOne_evictsTheOthers_andKeepsTheNewValue() {
        let cache = MemoryCache<String, [Int]>(costLimit: 10, cost: { $0.count })
        cache.insert([1, 2, 3], for: "a")
        cache.insert([4, 5, 6], for: "b")
        cache.insert(Array(repeating: 7, count: 9), for: "a")

        XCTAssertEqual(try? cache.cachedValue(for: "a").get().value, Array(repeating: 7, count: 9))
        XCTAssertEqual(cache.cachedValue(for: "b").failure, .absent, "evicted to make room")
        XCTAssertEqual(cache.totalCost, 9)
        XCTAssertEqual(cache.count, 1)
    }

    func test_aReplacedValue_isReleasedAfterUnlocking_soItsDeinitializerMayUseTheCache() {
        let cache = MemoryCache<String, CallingBack>()
        let seen = Locked<Int?>(nil)
        cache.insert(CallingBack { seen.withLock { $0 = try? cache.cachedValue(for: "a").get().value.id } }, for: "a")
        cache.insert(CallingBack(id: 2) {}, for: "a")  // a deadlock if the first value were released under the lock

        XCTAssertEqual(seen.withLock { $0 }, 2, "the replaced value's deinitializer read the new one")
    }

    func test_evictionOrder_overManyOperations_matchesAReferenceModel() {
        var generator = SystemRandomNumberGenerator()
        let cache = MemoryCache<Int, Int>(countLimit: 8)
        var model: [Int] = []  // keys, most recent last
        for step in 0..<5_000 {
            let key = Int.random(in: 0..<20, using: &generator)
            if Bool.random(using: &generator) {
                cache.insert(step, for: key)
                model.removeAll { $0 == key }
                model.append(key)
                if model.count > 8 { model.removeFirst() }
            } else {
                let hit = (try? cache.cachedValue(for: key).get()) != nil
                XCTAssertEqual(hit, model.contains(key), "step \(step)")
                if hit {
                    model.removeAll { $0 == key }
                    model.append(key)
                }
            }
        }
        XCTAssertEqual(cache.count, model.count)
    }

    func test_countAndCostLimits_overSeededHistories_matchAReferenceModel() {
        // The model: entries least recently used first. An insert makes its key the most recent; then the least
        // recent go while the count or the total cost is over its limit. A value costing more than the limit alone
        // is not kept, and takes the key's old value out.
        for seed in UInt64(1)...200 {
            var random = SeededRandom(seed: seed)
            let countLimit = Int.random(in: 1...6, using: &random)
            let costLimit = Int.random(in: 3...12, using: &random)
            let cache = MemoryCache<Int, [Int]>(countLimit: countLimit, costLimit: costLimit, cost: { $0.count })
            var model: [(key: Int, value: [Int])] = []
            for step in 0..<300 {
                let key = Int.random(in: 0..<10, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0, 1:
                    let value = Array(repeating: step, count: Int.random(in: 0...(costLimit + 1), using: &random))
                    cache.insert(value, for: key)
                    model.removeAll { $0.key == key }
                    guard value.count <= costLimit else { break }
                    model.append((key, value))
                    while model.count > countLimit || model.reduce(0, { $0 + $1.value.count }) > costLimit {
                        model.removeFirst()
                    }
                case 2:
                    cache.remove(key)
                    model.removeAll { $0.key == key }
                default:
                    let read = try? cache.cachedValue(for: key).get().value
                    XCTAssertEqual(read, model.first { $0.key == key }?.value, "seed \(seed), step \(step)")
                    if let index = model.firstIndex(where: { $0.key == key }) { model.append(model.remove(at: index)) }
                }
                XCTAssertEqual(cache.count, model.count, "seed \(seed), step \(step)")
                XCTAssertEqual(cache.totalCost, model.reduce(0) { $0 + $1.value.count }, "seed \(seed), step \(step)")
            }
        }
    }

    func test_keysSharingAHashValue_keepTheirOwnValues_throughReadsRemovalsAndEvictions() {
        var generator = SystemRandomNumberGenerator()
        let cache = MemoryCache<CollidingKey, Int>(countLimit: 6)
        var model: [(key: CollidingKey, value: Int)] = []  // most recent last
        for step in 0..<5_000 {
            let key = CollidingKey(id: Int.random(in: 0..<12, using: &generator))
            switch Int.random(in: 0..<3, using: &generator) {
            case 0:
                cache.insert(step, for: key)
                model.removeAll { $0.key == key }
                model.append((key, step))
                if model.count > 6 { model.removeFirst() }
            case 1:
                cache.remove(key)
                model.removeAll { $0.key == key }
            default:
                let read = try? cache.cachedValue(for: key).get().value
                let expected = model.first { $0.key == key }?.value
                XCTAssertEqual(read, expected, "step \(step)")
                if let index = model.firstIndex(where: { $0.key == key }) { model.append(model.remove(at: index)) }
            }
        }
        XCTAssertEqual(cache.count, model.count)
    }

    func test_entry_isALoaderAndACache() {
        let cache = MemoryCache<String, Int>()
        let recorder = LoadRecorder<Int>()

        recorder.load(cache["a"])
        cache["a"].save(5) { _ in }
        recorder.load(cache["a"])

        XCTAssertEqual(recorder.errors.first as? CacheMiss, .absent)
        XCTAssertEqual(recorder.values, [5])
    }
}

final class DiskCacheTests: XCTestCase {
    private var directory: URL!

    override func setUp() {
        super.setUp()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("DiskCacheTests-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
        super.tearDown()
    }

    func test_keyedCacheContract() {
        KeyedCacheContract(keys: ("a/b", "../c"), sampleValues: (Sample(name: "Ada"), Sample(name: "Grace"))) {
            expiry, now in
            DiskCache<String, Sample>(
                directory: self.directory.appendingPathComponent(UUID().uuidString), expiry: expiry, now: now)
        }.verify()
    }

    func test_valuesSurviveANewCacheOnTheSameDirectory() {
        save(Sample(name: "Ada"), for: 1, to: DiskCache(directory: directory))
        XCTAssertEqual(read(1, from: DiskCache<Int, Sample>(directory: directory)), .success(Sample(name: "Ada")))
    }

    func test_corruptEntry_isAMissAndIsDeleted() throws {
        let cache = DiskCache<Int, Sample>(directory: directory)
        save(Sample(name: "Ada"), for: 1, to: cache)
        let file = try XCTUnwrap(entryFiles().first)
        try Data("{\"trunc".utf8).write(to: file)

        XCTAssertEqual(read(1, from: cache), .failure(.absent))
        XCTAssertEqual(entryFiles(), [], "the unreadable entry was deleted")
        save(Sample(name: "Grace"), for: 1, to: cache)
        XCTAssertEqual(read(1, from: cache), .success(Sample(name: "Grace")))
    }

    func test_entryOfAnotherType_isAMiss() throws {
        save(Sample(name: "Ada"), for: 1, to: DiskCache(directory: directory))
        let other = DiskCache<Int, [Int]>(directory: directory)
        let outcome = Locked<Result<CachedValue<[Int]>, any Error>?>(nil)
        let done = expectation(description: "read")
        other.value(for: 1) { result in
            outcome.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        guard case .failure(let error) = outcome.withLock({ $0 }) else { return XCTFail("expected a miss") }
        XCTAssertEqual(error as? CacheMiss, .absent)
    }

    func test_failedWrite_leavesThePreviousEntryIntact() {
        let cache = DiskCache<Int, Sample>(directory: directory)
        save(Sample(name: "Ada"), for: 1, to: cache)

        let failed = expectation(description: "save fails")
        cache.save(Sample(name: "not encodable", isEncodable: false), for: 1) { result in
            if case .failure = result { failed.fulfill() }
        }
        wait(for: [failed], timeout: .watchdog)

        XCTAssertEqual(read(1, from: cache), .success(Sample(name: "Ada")))
    }

    func test_removeAll_deletesTheTemporaryFilesOfInterruptedWrites_andLeavesOtherFilesAlone() throws {
        let cache = DiskCache<Int, Sample>(directory: directory)
        save(Sample(name: "Ada"), for: 1, to: cache)
        let entry = try XCTUnwrap(entryFiles().first)
        // What a process killed mid-write leaves: this cache's temporary file, and Foundation's (earlier versions).
        let leftovers = [
            entry.appendingPathExtension("3F2A.writing"), directory.appendingPathComponent(".dat.nosync1859.INgHiZ"),
        ]
        for file in leftovers { try Data("partial".utf8).write(to: file) }
        let unrelated = directory.appendingPathComponent("notes.txt")
        try Data("mine".utf8).write(to: unrelated)

        let emptied = expectation(description: "removeAll")
        cache.removeAll { _ in emptied.fulfill() }
        wait(for: [emptied], timeout: .watchdog)

        let remaining = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertEqual(
            remaining, [".lock", "notes.txt"],
            "entries and temporary files go; the saves' lock and a file the cache did not make stay")
    }

    func test_aDirectoryAtAnEntrysPath_isReplacedOnSave() throws {
        let cache = DiskCache<Int, Sample>(directory: directory)
        save(Sample(name: "Ada"), for: 1, to: cache)
        let entry = try XCTUnwrap(entryFiles().first)
        try FileManager.default.removeItem(at: entry)
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: false)
        try Data("x".utf8).write(to: entry.appendingPathComponent("inside"))

        save(Sample(name: "Grace"), for: 1, to: cache)

        XCTAssertEqual(read(1, from: cache), .success(Sample(name: "Grace")))
    }

    func test_aFailedWrite_isADiskCacheError_withTheKeyAndTheUnderlyingError() throws {
        try Data("not a directory".utf8).write(to: directory)  // the cache's directory cannot be made
        let cache = DiskCache<Int, Sample>(directory: directory)
        let outcome = Locked<(any Error)?>(nil)
        let done = expectation(description: "save")

        cache.save(Sample(name: "Ada"), for: 7) { result in
            if case .failure(let error) = result { outcome.withLock { $0 = error } }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)

        let error = try XCTUnwrap(outcome.withLock { $0 } as? DiskCacheError<Int>)
        XCTAssertEqual(error.operation, .save)
        XCTAssertEqual(error.key, 7)
        XCTAssertFalse(error.underlyingError is DiskCacheError<Int>)
        XCTAssertTrue(error.description.contains("7"))
    }

    private func entryFiles() -> [URL] {
        ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "entry" }
    }

    private func save(_ value: Sample, for key: Int, to cache: DiskCache<Int, Sample>) {
        let done = expectation(description: "save")
        cache.save(value, for: key) { result in
            if case .failure(let error) = result { XCTFail("save failed: \(error)") }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
    }

    private func read(_ key: Int, from cache: DiskCache<Int, Sample>) -> Result<Sample, CacheMiss>? {
        let outcome = Locked<Result<Sample, CacheMiss>?>(nil)
        let done = expectation(description: "read")
        cache.value(for: key) { result in
            outcome.withLock { $0 = result.map(\.value).mapError { ($0 as? CacheMiss) ?? .absent } }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return outcome.withLock { $0 }
    }
}

/// A Codable value whose encoding can be made to fail.
private struct Sample: Codable, Equatable, Sendable {
    var name: String
    var isEncodable = true

    private enum CodingKeys: String, CodingKey { case name }

    init(name: String, isEncodable: Bool = true) {
        self.name = name
        self.isEncodable = isEncodable
    }

    init(from decoder: any Decoder) throws {
        name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
    }

    func encode(to encoder: any Encoder) throws {
        guard isEncodable else {
            throw EncodingError.invalidValue(name, .init(codingPath: [], debugDescription: "refused"))
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A value whose deinitializer runs `onDeinit`.
private final class CallingBack: Sendable {
    let id: Int
    let onDeinit: @Sendable () -> Void

    init(id: Int = 1, onDeinit: @escaping @Sendable () -> Void) {
        self.id = id
        self.onDeinit = onDeinit
    }

    deinit { onDeinit() }
}

/// Keys of which a third share one hash value: the cache tells them apart by their own comparison.
private struct CollidingKey: Hashable, Sendable {
    let id: Int

    func hash(into hasher: inout Hasher) {
        hasher.combine(id % 3)
    }
}
