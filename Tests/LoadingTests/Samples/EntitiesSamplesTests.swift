import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

// The samples of `SharedEntities` and `EntityPath`, as written in their doc comments and the store's article, with
// the few names they assume.

extension Friend: Identifiable {}

private final class EntitiesAPI: Sendable {
    private let friends = Locked([Friend(id: "u1", name: "Ada"), Friend(id: "u2", name: "Grace")])

    func search(_ query: String) -> AnyLoader<[Friend]> {
        AnyLoader { [friends] completion in
            completion(.success(friends.withLock { $0 }.filter { $0.name.contains(query) || query.isEmpty }))
            return AnyCancellationToken {}
        }
    }

    func friend(_ id: String) -> AnyLoader<Friend> {
        AnyLoader { [friends] completion in
            completion(friends.withLock { $0 }.first { $0.id == id }.map { .success($0) } ?? .failure(CacheMiss.absent))
            return AnyCancellationToken {}
        }
    }
}

private let api = EntitiesAPI()

private struct ProfileScreen: Sendable, Equatable {
    var friend: Friend
    var posts: [String]
}

final class EntitiesSamplesTests: XCTestCase {
    func test_theSharedEntitiesSample_showsAnUpdateInEveryListAndInTheDetail() {
        // Sample: begin
        let friends = SharedEntities<Friend>()
        let lists = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (query: String) in api.search(query) },
            entities: friends.held(in: .elements))
        let details = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.friend(id) },
            entities: friends.held(in: .whole))
        // Sample: end
        let loaded = expectation(description: "loaded")
        loaded.expectedFulfillmentCount = 3
        lists.read("").load { _ in loaded.fulfill() }
        lists.read("Ada").load { _ in loaded.fulfill() }
        details.read("u1").load { _ in loaded.fulfill() }
        wait(for: [loaded], timeout: .watchdog)
        let everything = Locked<[[Friend]?]>([])
        let subscription = lists.changes(for: "").sink { response in everything.withLock { $0.append(response.value) } }
        defer { subscription.cancel() }

        // Sample: begin
        friends.update(Friend(id: "u1", name: "Ada L."))  // every list holding u1 and its detail show it, once each
        // Sample: end

        let renamed = [Friend(id: "u1", name: "Ada L."), Friend(id: "u2", name: "Grace")]
        XCTAssertEqual(everything.withLock { $0.last }, renamed)
        XCTAssertEqual(everything.withLock { $0.count }, 2, "the list held, then one change")
        XCTAssertEqual(value(of: "Ada", in: lists), [Friend(id: "u1", name: "Ada L.")])
        XCTAssertEqual(value(of: "u1", in: details), Friend(id: "u1", name: "Ada L."))
    }

    private func value<Key: Hashable & Sendable, Value: Sendable>(of key: Key, in store: Store<Key, Value>) -> Value? {
        let read = expectation(description: "read")
        let value = Locked<Value?>(nil)
        store.read(key, policy: .cacheOnly).load { result in
            value.withLock { $0 = try? result.get().value }
            read.fulfill()
        }
        wait(for: [read], timeout: .watchdog)
        return value.withLock { $0 }
    }

    func test_theEntityPathSample_findsAndReplacesTheEntities() {
        // Sample: begin
        let inPages: EntityPath<PagedList<Friend, Int>, Friend> = .items()
        let inProfile = EntityPath<ProfileScreen, Friend>(
            entities: { screen in [screen.friend] },
            replacing: { screen, newer in newer(screen.friend).map { ProfileScreen(friend: $0, posts: screen.posts) } })
        // Sample: end
        let ada = Friend(id: "u1", name: "Ada")
        let friends = SharedEntities<Friend>()
        let feeds = PagedStore<String, Friend, Int>(
            levels: [.cache(MemoryCache(), name: "memory")], entities: friends.held(in: inPages)
        ) { _, _ in
            AnyLoader<Page<Friend, Int>> { completion in
                completion(.success(Page(items: [ada, Friend(id: "u2", name: "Grace")], nextCursor: nil)))
                return AnyCancellationToken {}
            }
        }
        let profiles = Store(
            levels: [.cache(MemoryCache(), name: "memory")],
            fetch: LoaderFamily { (id: String) in
                api.friend(id).map { ProfileScreen(friend: $0, posts: ["Notes on the engine"]) }
            },
            entities: friends.held(in: inProfile))
        let loaded = expectation(description: "loaded")
        loaded.expectedFulfillmentCount = 2
        feeds.nextPage(of: "home").load { _ in loaded.fulfill() }
        profiles.read("u1").load { _ in loaded.fulfill() }
        wait(for: [loaded], timeout: .watchdog)

        friends.update(ada.renamed("Ada L."))

        XCTAssertEqual(value(of: "home", in: feeds.store)?.items.map(\.name), ["Ada L.", "Grace"])
        let profile = ProfileScreen(friend: ada.renamed("Ada L."), posts: ["Notes on the engine"])
        XCTAssertEqual(value(of: "u1", in: profiles), profile)
    }
}
