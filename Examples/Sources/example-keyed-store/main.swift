// Keyed loads over real HTTP: a friend by id and pages of the list, through a coalesced loader family with a memory
// and a disk cache, then a store that is the one source of truth for friend details (read policies, a live update,
// an optimistic change the server refuses, a logout). Exits non-zero if anything behaves otherwise.
// Run: swift run --package-path Examples example-keyed-store
import Dispatch
import Foundation
import FriendsDomain
import FriendsServer
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let start = Date(timeIntervalSince1970: 1_795_000_000)
let server = try FriendsAPIServer(
    friends: (1...45).map { Friend(id: "u\($0)", name: "Friend \($0)", status: .online, updatedAt: start) })
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keyed-store-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: folder) }
let session = URLSession(configuration: .ephemeral)
let failures = Locked(0)

func check(_ condition: Bool, _ description: String) {
    print(condition ? "  ✓ \(description)" : "  ✗ \(description)")
    if !condition { failures.withLock { $0 += 1 } }
}

/// `GET {base}/{path}` decoded as `T`: a loader over URLSession, cancelled with its data task.
func get<T: Decodable & Sendable>(_ path: String, as type: T.Type) -> AnyLoader<T> {
    let url = URL(string: path, relativeTo: server.baseURL)!
    return AnyLoader { completion in
        let task = session.dataTask(with: url) { data, response, error in
            guard let data, (response as? HTTPURLResponse)?.statusCode == 200 else {
                return completion(.failure(error ?? URLError(.badServerResponse)))
            }
            completion(Result { try Friend.makeDecoder().decode(T.self, from: data) })
        }
        task.resume()
        return AnyCancellationToken { task.cancel() }
    }
}

/// Waits for one load's result.
func resultOf<T: Sendable>(_ loader: AnyLoader<T>) -> Result<T, any Error> {
    let result = Locked<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let token = loader.load { outcome in
        result.withLock { $0 = outcome }
        done.signal()
    }
    _ = done.wait(timeout: .now() + 10)
    withExtendedLifetime(token) {}
    return result.withLock { $0 } ?? .failure(URLError(.timedOut))
}

struct Page: Codable, Sendable {
    let friends: [Friend]
}

// 1. A friend by id: memory, else disk, else the network, one request per id in flight.
print("1. A friend by id, ten screens asking at once")
let memory = MemoryCache<String, Friend>(countLimit: 100, expiry: .maxAge(.seconds(300)))
let disk = DiskCache<String, Friend>(
    directory: folder.appendingPathComponent("friends"), expiry: .maxAge(.seconds(604_800)))
let api = LoaderFamily { (id: String) in get("friends/\(id)", as: Friend.self) }
let friend = LoaderFamily { (id: String) in
    memory[id]
        .fallback(to: disk[id].caching(to: memory[id]))
        .fallback(
            to: api[id]
                .retry(.exponential(initial: .milliseconds(100), maxAttempts: 3))
                .caching(to: disk[id], policy: .failLoad)
                .caching(to: memory[id]))
}
.coalesced()

server.setLatency(.milliseconds(100))
let group = DispatchGroup()
let names = Locked<[String]>([])
var tokens: [any CancellationToken] = []
for _ in 0..<10 {
    group.enter()
    tokens.append(
        friend["u7"].load { result in
            names.withLock { $0.append((try? result.get().name) ?? "failed") }
            group.leave()
        })
}
_ = group.wait(timeout: .now() + 10)
server.setLatency(.zero)
check(names.withLock { $0 } == Array(repeating: "Friend 7", count: 10), "all ten got Friend 7")
check(server.friendRequestCount == 1, "one request reached the server (\(server.friendRequestCount))")
_ = resultOf(friend["u7"])
check(server.friendRequestCount == 1, "a later load is a memory hit")
memory.clear()
_ = resultOf(friend["u7"])
check(server.friendRequestCount == 1, "with memory cleared, the disk answers")
check(resultOf(friend["nobody"]).isFailure, "an unknown id fails (404)")

// 2. Pages of the list, keyed by page number.
print("2. Pages of the list")
let pageCache = MemoryCache<Int, [Friend]>(countLimit: 10)
let pages = LoaderFamily { (page: Int) in
    pageCache[page].fallback(
        to: get("friends?page=\(page)&per_page=20", as: Page.self).map(\.friends).caching(to: pageCache[page]))
}
.coalesced()
let counts = (1...3).map { (try? resultOf(pages[$0]).get().count) ?? -1 }
check(counts == [20, 20, 5], "pages of 20, 20 and 5 friends (\(counts))")

// 3. A store: one source of truth for friend details.
print("3. The store")
let details = Store(
    levels: [
        .cache(MemoryCache<String, Friend>(countLimit: 100), name: "memory"),
        .cache(disk, name: "disk"),
    ],
    fetch: api)
let responses = Locked<[StoreResponse<Friend>]>([])
let observed = DispatchSemaphore(value: 0)
let subscription = details.stream(for: "u7", policy: .cacheThenNetwork).sink { completion in
    print("  store stream ended: \(completion)")
} receiveValue: { response in
    responses.withLock { $0.append(response) }
    observed.signal()
}
_ = observed.wait(timeout: .now() + 5)
_ = observed.wait(timeout: .now() + 5)
check(responses.withLock { $0.map(\.origin) } == [.cache("disk"), .network], "the cached value, then the fresh one")

details.write(Friend(id: "u7", name: "Friend 7 (away)", status: .away, updatedAt: start), for: "u7")
_ = observed.wait(timeout: .now() + 5)
check(responses.withLock { $0.last?.value?.status } == .away, "a live update reaches every observer")

let refused = AnyLoader<Void> { completion in
    completion(.failure(URLError(.badServerResponse)))
    return AnyCancellationToken {}
}
let outcome = Locked<Result<Void, any Error>?>(nil)
let rename: @Sendable (Friend?) -> Friend? = { friend in
    friend.map { Friend(id: $0.id, name: "Renamed", status: $0.status, updatedAt: $0.updatedAt) }
}
details.mutate("u7", rename, commit: refused, completion: { result in outcome.withLock { $0 = result } })
_ = observed.wait(timeout: .now() + 5)
_ = observed.wait(timeout: .now() + 5)
check(
    responses.withLock { $0.suffix(2).map { $0.value?.name } } == ["Renamed", "Friend 7 (away)"],
    "a refused change shows, then is undone")
check(outcome.withLock { $0 }?.isFailure == true, "the caller learns it was refused")

let emptied = DispatchSemaphore(value: 0)
details.clear { emptied.signal() }
_ = observed.wait(timeout: .now() + 5)
check(responses.withLock { $0.last.map { $0.value == nil } } == true, "a logout leaves nothing to show")
_ = emptied.wait(timeout: .now() + 5)
check(resultOf(AnyLoader(disk["u7"])).isFailure, "and nothing on disk once the clear completed")
subscription.cancel()
server.stop()

let failed = failures.withLock { $0 }
print(failed == 0 ? "All steps behaved as expected." : "\(failed) step(s) did not behave as expected.")
exit(failed == 0 ? 0 : 1)

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}
