import Foundation
import FriendsDomain
import Loading

/// 8. A memory-cache hit through a coalesced loader family, against a locked `Dictionary` lookup.
func keyedMemoryHitScenario(loads: Int) -> Scenario {
    let keys = 100
    let memory = MemoryCache<Int, Int>(countLimit: 1_000)
    for key in 0..<keys { memory.save(key, for: key) { _ in } }
    let network = AnyLoader<Int> { completion in
        completion(.failure(BenchmarkError()))
        return NoToken()
    }
    let family = LoaderFamily { (key: Int) in memory[key].fallback(to: network.caching(to: memory[key])) }.coalesced()
    let lock = NSLock()
    let dictionary = ResultBox<[Int: Int]>()
    dictionary.value = Dictionary(uniqueKeysWithValues: (0..<keys).map { ($0, $0) })
    let sum = Tally()
    let deliver: @Sendable (Result<Int, any Error>) -> Void = opaqueFunction { result in
        sum.value &+= (try? result.get()) ?? 0
    }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let locked = Variant(name: "locked Dictionary lookup") { count in
        for index in 0..<count {
            lock.lock()
            let value = dictionary.value![index % keys]
            lock.unlock()
            deliver(.success(value!))
        }
        return checksum()
    }
    let keyed = Variant(name: "coalesced family, memory hit") { count in
        for index in 0..<count { family[index % keys].load(completion: deliver) }
        return checksum()
    }
    let cacheRead = Variant(name: "MemoryCache read") { count in
        for index in 0..<count { memory.value(for: index % keys) { deliver($0.map(\.value)) } }
        return checksum()
    }
    return Scenario(
        title: "8. Keyed memory hit: a coalesced LoaderFamily over a MemoryCache, 100 keys",
        unit: "loads", operations: loads, reference: "locked Dictionary lookup",
        variants: [locked, cacheRead, keyed],
        targets: [
            .instructions(
                "coalesced family, memory hit", atMost: 3, of: "locked Dictionary lookup",
                label: "keyed memory-cache hit through a coalesced family, instructions vs a locked Dictionary")
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % keys } })
}

/// 9. Many concurrent loads of one key through a coalesced family: one upstream load.
func keyedCoalescingScenario(callers: Int) -> Scenario {
    let held = HeldBatchSource()
    let network = LoaderFamily { (_: Int) in held.loader }
    let coalesced = network.coalesced()
    return coalescingScenario(
        title: "9. Keyed coalescing: \(Report.count(callers)) concurrent loads of one key", callers: callers,
        separate: ("a load per call", { network[7].load(completion: $0) }),
        shared: ("coalesced family", { coalesced[7].load(completion: $0) }), source: held)
}

/// 10. DiskCache writes and reads of small values, against `Data.write(options: .atomic)` and `Data(contentsOf:)`.
func diskCacheScenarios(values: Int, folder: URL) -> [Scenario] {
    struct Small: Codable, Sendable {
        let id: Int
        let name: String
    }
    let encoder = JSONEncoder()
    let rawFolder = folder.appendingPathComponent("raw")
    try? FileManager.default.createDirectory(at: rawFolder, withIntermediateDirectories: true)
    let cache = DiskCache<Int, Small>(directory: folder.appendingPathComponent("disk-cache"))
    func wait(_ start: (@escaping @Sendable (Bool) -> Void) -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let outcome = ResultBox<Bool>()
        start { ok in
            outcome.value = ok
            done.signal()
        }
        done.wait()
        return outcome.value ?? false
    }
    let rawWrite = Variant(name: "Data.write(options: .atomic)") { count in
        var written = 0
        for index in 0..<count {
            let data = try! encoder.encode(Small(id: index, name: "friend \(index)"))
            if (try? data.write(to: rawFolder.appendingPathComponent("\(index).json"), options: .atomic)) != nil {
                written += 1
            }
        }
        return written
    }
    let cacheWrite = Variant(name: "DiskCache.save") { count in
        var written = 0
        for index in 0..<count {
            if wait({ done in
                cache.save(Small(id: index, name: "friend \(index)"), for: index) { done((try? $0.get()) != nil) }
            }) {
                written += 1
            }
        }
        return written
    }
    let rawRead = Variant(name: "Data(contentsOf:)") { count in
        var read = 0
        let decoder = JSONDecoder()
        for index in 0..<count {
            if let data = try? Data(contentsOf: rawFolder.appendingPathComponent("\(index).json")),
                (try? decoder.decode(Small.self, from: data)) != nil
            {
                read += 1
            }
        }
        return read
    }
    let cacheRead = Variant(name: "DiskCache.value(for:)") { count in
        var read = 0
        for index in 0..<count where wait({ done in cache.value(for: index) { done((try? $0.get()) != nil) } }) {
            read += 1
        }
        return read
    }
    return [
        Scenario(
            title: "10a. DiskCache: write \(Report.count(values)) small values", unit: "writes", operations: values,
            reference: "Data.write(options: .atomic)", variants: [rawWrite, cacheWrite],
            expectedChecksum: { $0 },
            note: "same JSON-encoded struct, one file each; the cache also stamps, wraps its key and hops to its queue"),
        Scenario(
            title: "10b. DiskCache: read \(Report.count(values)) small values back", unit: "reads", operations: values,
            reference: "Data(contentsOf:)", variants: [rawRead, cacheRead],
            expectedChecksum: { $0 }),
    ]
}

/// 11. Decoding a friends list: the API's format (ISO 8601 dates, parsed by hand) against `JSONDecoder` decoding the
/// same struct with numeric dates (no date parsing at all).
func decodeFriendsScenario(friends count: Int) -> Scenario {
    let start = Date(timeIntervalSince1970: 1_795_000_000)
    let friends = (0..<count).map {
        Friend(
            id: "u\($0)", name: "Friend \($0)", status: .online, updatedAt: start.addingTimeInterval(Double($0) + 0.25))
    }
    let apiJSON = try! Friend.makeEncoder().encode(friends)
    let numericEncoder = JSONEncoder()
    numericEncoder.dateEncodingStrategy = .secondsSince1970
    let numericJSON = try! numericEncoder.encode(friends)
    let numericDecoder = JSONDecoder()
    numericDecoder.dateDecodingStrategy = .secondsSince1970
    let reference = Variant(name: "JSONDecoder, numeric dates") { repetitions in
        var decoded = 0
        for _ in 0..<repetitions {
            decoded += (try? numericDecoder.decode([Friend].self, from: opaque(numericJSON)))?.count ?? 0
        }
        return decoded
    }
    let api = Variant(name: "Friend.makeDecoder(), ISO 8601") { repetitions in
        var decoded = 0
        for _ in 0..<repetitions {
            decoded += (try? Friend.makeDecoder().decode([Friend].self, from: opaque(apiJSON)))?.count ?? 0
        }
        return decoded
    }
    return Scenario(
        title: "11. Decode \(Report.count(count)) friends from JSON", unit: "lists", operations: 1,
        reference: "JSONDecoder, numeric dates", variants: [reference, api],
        targets: [
            .instructions(
                "Friend.makeDecoder(), ISO 8601", atMost: 1.2, of: "JSONDecoder, numeric dates",
                label: "decode friends from JSON, instructions vs JSONDecoder")
        ],
        expectedChecksum: { $0 * count }, countedOperations: 2)
}
