import Foundation
import Loading
import LoadingScreens
import LoadingTestSupport
import XCTest

// The code samples of the doc comments of freshness (invalidation, revalidation, network modes), pages, the offline
// mutation queue and observation, as written there, each with the few names it assumes.

// MARK: The names the samples assume

private struct UserProfile: Sendable, Equatable {
    let name: String
}

private struct APIError: Error {
    let isRefusal: Bool
}

private struct RenameFriend: Codable, Sendable {
    let id: String
    let name: String
}

private final class SampleAPI: Sendable {
    let deleted = Locked<[(id: String, key: String)]>([])
    let posts = PageSource(count: 5)

    func profile(_ id: String) -> AnyLoader<UserProfile> { answer(UserProfile(name: "Ada")) }
    func friend(_ id: String) -> AnyLoader<Friend> { answer(Friend(id: id, name: "Ada")) }
    func rename(_ id: String, to name: String) -> AnyLoader<Void> { answer(()) }
    func posts(in feed: String, after cursor: Int?) -> AnyLoader<Page<Post, Int>> { posts.page(at: cursor) }
    func deleteFriend(_ id: String, idempotencyKey: String) -> AnyLoader<Void> {
        deleted.withLock { $0.append((id, idempotencyKey)) }
        return answer(())
    }

    private func answer<Value: Sendable>(_ value: Value) -> AnyLoader<Value> {
        AnyLoader { completion in
            completion(.success(value))
            return AnyCancellationToken {}
        }
    }
}

private let api = SampleAPI()
private let shownResults = Locked(0)

private func show<Value>(_ result: Result<Value, any Error>) {
    shownResults.withLock { $0 += 1 }
}

final class FreshnessSamplesTests: XCTestCase {
    private let store = Store<String, Friend>(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })

    func test_invalidate() {
        let friends = store
        let read = LoadRecorder<StoreResponse<Friend>>()
        _ = read.load(friends.read("u1"))
        // Sample: begin
        api.rename("u1", to: "Ada L.").load { _ in friends.invalidate("u1") }  // the server changed it
        // Sample: end
        XCTAssertEqual(read.count, 1)
    }

    func test_invalidateWhere() {
        let pages = store
        // Sample: begin
        pages.invalidate { $0.hasPrefix("search:") }  // every search result list
        // Sample: end
    }

    func test_revalidateOnTriggers() {
        let lifecycle = ManualAppLifecycle()
        let connectivity = ManualConnectivity()
        let observed = StreamRecorder(store.changes(for: "u1"))
        // Sample: begin
        let revalidation = store.revalidate(on: .foreground(lifecycle), .reconnect(connectivity))
        // Sample: end
        lifecycle.enterForeground()
        XCTAssertEqual(observed.values.map(\.value?.name), ["Ada"], "the observed key was fetched")
        withExtendedLifetime(revalidation) {}
    }

    func test_revalidationTriggers() {
        let lifecycle = ManualAppLifecycle()
        let connectivity = ManualConnectivity()
        // Sample: begin
        let revalidation = store.revalidate(
            on: .foreground(lifecycle), .reconnect(connectivity),
            .interval(.seconds(60), scheduler: .global()))
        // Sample: end
        revalidation.cancel()
    }

    func test_manualAppLifecycle() {
        let observed = StreamRecorder(store.changes(for: "u1"))
        // Sample: begin
        let lifecycle = ManualAppLifecycle()
        let revalidation = store.revalidate(on: .foreground(lifecycle))
        lifecycle.enterForeground()  // observed keys that are stale are fetched anew
        // Sample: end
        XCTAssertEqual(observed.values.count, 1)
        withExtendedLifetime(revalidation) {}
    }

    func test_networkMode() {
        // Sample: begin
        let connectivity = ManualConnectivity()
        let friends = Store(
            levels: [.cache(MemoryCache<String, Friend>(), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.friend(id) },
            network: .waitsForNetwork(connectivity))
        // Sample: end
        connectivity.setOnline(false)
        let read = LoadRecorder<StoreResponse<Friend>>()
        let token = read.load(friends.read("u1"))
        XCTAssertEqual(read.count, 0, "waits for the network")
        connectivity.setOnline(true)
        XCTAssertEqual(read.count, 1)
        withExtendedLifetime(token) {}
    }

    func test_manualConnectivity() {
        // Sample: begin
        let connectivity = ManualConnectivity(isOnline: false)
        let friends = Store(
            levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) },
            network: .waitsForNetwork(connectivity))
        connectivity.setOnline(true)  // reads waiting for the network start their fetches
        // Sample: end
        XCTAssertEqual(value(friends.read("u1"))?.name, "Ada")
    }

    func test_waitingForNetwork_andFailingWhileOffline() {
        let connectivity = ManualConnectivity(isOnline: false)
        let before = shownResults.withLock { $0 }
        do {
            // Sample: begin
            let profile = api.profile("me").waitingForNetwork(connectivity)
            let token = profile.load { result in show(result) }  // offline: starts when the network comes back
            // Sample: end
            XCTAssertEqual(shownResults.withLock { $0 }, before)
            connectivity.setOnline(true)
            XCTAssertEqual(shownResults.withLock { $0 }, before + 1)
            withExtendedLifetime(token) {}
        }
        connectivity.setOnline(false)
        // Sample: begin
        let profile = api.profile("me").failingWhileOffline(connectivity)
        // Sample: end
        let result = LoadRecorder<UserProfile>()
        _ = result.load(profile)
        XCTAssertEqual(result.errors.first as? OfflineError, OfflineError())
    }

    // MARK: Pages

    func test_page() {
        let friends = [Friend(id: "u1", name: "Ada")]
        let offset = 40
        // Sample: begin
        let page = Page(items: friends, nextCursor: friends.count < 20 ? nil : offset + friends.count)
        // Sample: end
        XCTAssertNil(page.nextCursor)
    }

    func test_pagedList() {
        // Sample: begin
        let list = PagedList(firstPage: Page(items: [1, 2], nextCursor: 2))
        let items = list.items  // [1, 2]
        let hasMore = list.hasNextPage  // true
        // Sample: end
        XCTAssertEqual(items, [1, 2])
        XCTAssertTrue(hasMore)
    }

    func test_pagedStore() {
        let editedPost = Post(id: 1, text: "edited")
        // Sample: begin
        let feeds = PagedStore(
            levels: [.cache(MemoryCache<String, PagedList<Post, Int>>(), name: "memory")],
            maxPages: 10
        ) { (feed: String, cursor: Int?) in
            api.posts(in: feed, after: cursor)  // any Loader of Page<Post, Int>
        }
        feeds.nextPage(of: "home").load { result in show(result) }  // the first page, then each next one
        feeds.store.freshValue(of: "home").load { _ in }  // revalidates the loaded pages
        feeds.store.update("home") { $0?.replacing(editedPost) }  // a live change, in the page that holds it
        // Sample: end
        XCTAssertEqual(value(feeds.store.read("home", policy: .cacheOnly))?.items.map(\.text)[1], "edited")
    }

    // MARK: The offline queue

    func test_mutationQueue() async throws {
        let support = FileManager.default.temporaryDirectory.appendingPathComponent("sample-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: support) }
        let friends = Store<String, [Friend]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[Friend]>() })
        friends.write([Friend(id: "u3", name: "Grace")], for: "all")
        let connectivity = ManualConnectivity()
        // Sample: begin
        let outbox = try MutationQueue(
            store: friends,  // Store<String, [Friend]>
            storage: FileMutationStorage<String>(directory: support.appendingPathComponent("deletes")),
            connectivity: connectivity,
            key: { _ in "all" },
            change: { id, list in list?.filter { $0.id != id } },
            send: { id, idempotencyKey in api.deleteFriend(id, idempotencyKey: idempotencyKey) },
            isRefused: { error in (error as? APIError)?.isRefusal == true })
        try await outbox.enqueue("u3")  // on disk, shown at once, sent when the network allows
        // Sample: end
        XCTAssertEqual(api.deleted.withLock { $0.last?.id }, "u3")
        XCTAssertFalse(outbox.isMutating)
    }

    func test_fileMutationStorage() throws {
        let support = FileManager.default.temporaryDirectory.appendingPathComponent("sample-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: support) }
        // Sample: begin
        let outbox = FileMutationStorage<RenameFriend>(directory: support.appendingPathComponent("outbox"))
        // Sample: end
        XCTAssertEqual(try outbox.loadAll().count, 0)
    }

    private func value<Value>(_ read: AnyLoader<StoreResponse<Value>>) -> Value? {
        let recorder = LoadRecorder<StoreResponse<Value>>()
        _ = recorder.load(read)
        return recorder.values.first?.value
    }
}

#if canImport(Observation)
    // Sample: begin
    @MainActor final class FeedScreen {
        let feed: PagedListModel<String, Post, Int>

        init(posts: PagedStore<String, Post, Int>) {
            feed = PagedListModel(store: posts, key: "home")
        }

        func appeared() { feed.load() }
        func reachedTheLastRow() { feed.loadNextPage() }  // nothing while a page loads or at the end
        func tappedRetry() { feed.loadNextPage() }  // after nextPageError
    }
    // Sample: end

    @MainActor
    final class ObservationSamplesTests: XCTestCase {
        func test_feedScreen() async {
            let posts = PagedStore(levels: [], maxPages: nil) { (_: String, cursor: Int?) in
                api.posts(in: "home", after: cursor)
            }
            let screen = FeedScreen(posts: posts)
            screen.appeared()
            let loaded = await eventuallyOnMainActor { screen.feed.items.count == 2 }
            XCTAssertTrue(loaded)
            screen.reachedTheLastRow()
            let more = await eventuallyOnMainActor { screen.feed.items.count == 4 }
            XCTAssertTrue(more)
        }

        func test_showAnotherKey_andSelect() async {
            let profiles = Store<String, Friend>(
                levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })
            // Sample: begin
            let profile = ResourceModel(store: profiles, key: "u1")
            profile.show("u2", of: profiles)  // u1 stays on screen, loading, until u2 arrives
            // Sample: end
            let friend = profile
            // Sample: begin
            let name = friend.select { $0?.name }  // a Selection<String?>
            // Sample: end
            XCTAssertEqual(name.value, "Ada")
        }

        func test_streamSelect() {
            let store = Store<String, Friend>(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })
            // Sample: begin
            let names = store.changes(for: "u1").select { $0.value?.name }  // a new name, not every change of u1
            // Sample: end
            // Sample: begin
            let values = store.changes(for: "u1").select(\.value)  // no repeat when a refresh brings the same value
            // Sample: end
            let recorded = (StreamRecorder(names), StreamRecorder(values))
            store.write(Friend(id: "u1", name: "Ada"), for: "u1")
            store.write(Friend(id: "u1", name: "Ada"), for: "u1")
            XCTAssertEqual(recorded.0.values, ["Ada"])
            XCTAssertEqual(recorded.1.values.count, 1)
        }
    }
#endif
