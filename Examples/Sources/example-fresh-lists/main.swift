// Lists that grow, data that stays fresh, writes that wait for the network, against the embedded friends API over
// real HTTP: a paged list with a page cap and a refresh that stops at the first unchanged page; an invalidation
// that refetches what a screen shows; revalidation when the app comes back to the foreground and when the network
// returns; deletes made offline, kept on disk, replayed in order, one refused and undone alone.
// Exits non-zero if anything behaves otherwise. Run: swift run --package-path Examples example-fresh-lists
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
    friends: (1...25).map { Friend(id: "u\($0)", name: "Friend \($0)", status: .online, updatedAt: start) },
    latency: .milliseconds(5))
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fresh-lists-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: folder) }
let client = URLSessionHTTPClient(session: URLSession(configuration: .ephemeral))
let failures = Locked(0)

func check(_ condition: Bool, _ description: String) {
    print(condition ? "  ✓ \(description)" : "  ✗ \(description)")
    if !condition { failures.withLock { $0 += 1 } }
}

/// Waits for one load's result.
func result<T: Sendable>(of loader: AnyLoader<T>) -> Result<T, any Error> {
    let box = Locked<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let token = loader.load { outcome in
        box.withLock { $0 = outcome }
        done.signal()
    }
    _ = done.wait(timeout: .now() + 10)
    withExtendedLifetime(token) {}
    return box.withLock { $0 } ?? .failure(URLError(.timedOut))
}

/// Waits until `condition` holds (a real server answers on its own time).
func eventually(_ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(60)  // a watchdog: a busy machine is slower, not wrong
    while !condition() {
        if Date() > deadline { return false }
        Thread.sleep(forTimeInterval: 0.005)
    }
    return true
}

// 1. A list that grows a page at a time.
print("1. Pages")
let pages = PagedStore(levels: [.cache(MemoryCache<String, PagedList<Friend, Int>>(), name: "memory")], maxPages: 2) {
    (_: String, page: Int?) in
    RemoteFriendsPageLoader(page: page ?? 1, perPage: 5, baseURL: server.baseURL, client: client)
}
for _ in 0..<3 { _ = result(of: pages.nextPage(of: "all")) }
let grown = try? result(of: pages.store.read("all", policy: .cacheOnly)).get().value
check(grown?.items.map(\.id) == (6...15).map { "u\($0)" }, "three pages of 5, capped at 2: friends 6 to 15")
check(grown?.startsAtFirstPage == false, "the first page was dropped")
let before = server.listRequestCount
_ = result(of: pages.store.freshValue(of: "all"))
check(server.listRequestCount - before == 1, "a refresh with nothing changed asks for one page, then stops")

// 2. Invalidation: a screen's key is fetched anew at once; an unobserved one on its next read.
print("2. Invalidation")
let friend = Store(
    levels: [.cache(MemoryCache<String, Friend>(), name: "memory")],
    fetch: LoaderFamily { (id: String) in RemoteFriendLoader(id: id, baseURL: server.baseURL, client: client) })
let shown = Locked<[String]>([])
let screen = friend.stream(for: "u1").sink { _ in
} receiveValue: { response in
    shown.withLock { $0.append(response.value?.name ?? "-") }
}
_ = eventually { shown.withLock { $0.count } == 1 }
server.push(.upsert(Friend(id: "u1", name: "Ada (renamed)", status: .online, updatedAt: start)))
friend.invalidate("u1")
check(eventually { shown.withLock { $0.last } == "Ada (renamed)" }, "the screen shows the renamed friend")
_ = result(of: friend.read("u2"))
let requests = server.friendRequestCount
friend.invalidate { $0.hasPrefix("u") }
check(eventually { server.friendRequestCount == requests + 1 }, "by predicate: the observed key is fetched at once")
_ = result(of: friend.read("u2"))
check(server.friendRequestCount == requests + 2, "the other only on its next read")

// 3. Revalidation: the foreground and the network coming back fetch what is shown and not fresh.
print("3. Revalidation")
let lifecycle = ManualAppLifecycle()
let connectivity = ManualConnectivity(isOnline: true)
let clock = Locked(start)
let profiles = Store(
    levels: [.cache(MemoryCache<String, Friend>(now: { clock.withLock { $0 } }), name: "memory")],
    fetch: LoaderFamily { (id: String) in RemoteFriendLoader(id: id, baseURL: server.baseURL, client: client) },
    maxAge: .seconds(60), network: .answersFromCache(connectivity), now: { clock.withLock { $0 } })
let revalidation = profiles.revalidate(on: .foreground(lifecycle), .reconnect(connectivity))
let profile = profiles.changes(for: "u3").sink { _ in }
_ = result(of: profiles.read("u3"))
let counted = server.friendRequestCount
lifecycle.enterForeground()
check(server.friendRequestCount == counted, "fresh: the foreground fetches nothing")
clock.withLock { $0 = $0.addingTimeInterval(61) }
connectivity.setOnline(false)
lifecycle.enterForeground()
check(server.friendRequestCount == counted, "offline: nothing is requested")
connectivity.setOnline(true)
check(eventually { server.friendRequestCount == counted + 1 }, "the network back: the old value is fetched anew")

// 4. Deletes made offline: on disk, shown at once, replayed in order after a restart, a refused one undone alone.
print("4. Offline deletes")
let outbox = folder.appendingPathComponent("outbox")
func makeQueue(
    _ store: Store<String, [Friend]>, _ connectivity: ManualConnectivity
) throws -> MutationQueue<String, [Friend], String> {
    let deleter = RemoteFriendsDeleter(baseURL: server.baseURL, client: client)
    return try MutationQueue(
        store: store, storage: FileMutationStorage<String>(directory: outbox), connectivity: connectivity,
        key: { _ in "all" }, change: { id, list in list?.filter { $0.id != id } },
        send: { id, idempotencyKey in
            AnyLoader<Void> { completion in
                deleter.delete(id: id, idempotencyKey: idempotencyKey, completion: completion)
            }
        },
        isRefused: { !FriendsAPIError.isTransient($0) })
}
func makeList() -> Store<String, [Friend]> {
    let store = Store<String, [Friend]>(
        levels: [], fetch: LoaderFamily { _ in RemoteFriendsLoader(baseURL: server.baseURL, client: client) })
    _ = result(of: store.read("all"))
    return store
}
do {
    let list = makeList()
    let queue = try makeQueue(list, ManualConnectivity(isOnline: false))
    for id in ["u4", "u404", "u5"] { try queue.enqueue(id) }  // u404 is not on the server: refused
    let ids = (try? result(of: list.read("all", policy: .cacheOnly)).get().value?.map(\.id)) ?? []
    check(!ids.contains("u4") && !ids.contains("u5"), "offline: u4 and u5 are gone at once")
    check(server.deletedIDs.isEmpty, "and nothing reached the server")
}
let relaunched = makeList()
let online = ManualConnectivity(isOnline: false)
let queue = try makeQueue(relaunched, online)
check(queue.pending.map(\.input) == ["u4", "u404", "u5"], "a restart finds the three deletes, in order")
online.setOnline(true)
check(eventually { !queue.isMutating }, "online: each is settled")
check(server.deletedIDs == ["u4", "u5"], "u4 then u5 reached the server (\(server.deletedIDs))")
check(server.deleteKeys.allSatisfy { $0 != nil }, "each with its idempotency key")
check(
    server.deleteRequestCount == 3 && queue.pending.isEmpty,
    "the refused one was sent once, undone alone, and forgotten")

withExtendedLifetime((screen, revalidation, profile)) {}
server.stop()
let failed = failures.withLock { $0 }
print(failed == 0 ? "All steps behaved as expected." : "\(failed) step(s) did not behave as expected.")
exit(failed == 0 ? 0 : 1)
