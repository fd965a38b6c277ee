import Foundation
import Loading
import LoadingScreens
import LoadingTestSupport
import XCTest

// The samples of the article "Lists, freshness and offline writes", as written there, run against small doubles.

private struct ArticleAPIError: Error {
    let isRefusal: Bool
}

private struct Message: Equatable, Sendable {
    let number: Int
}

private final class ArticleAPI: Sendable {
    let feed = PageSource(count: 30, pageSize: 10)
    let deleted = Locked<[String]>([])

    func posts(after offset: Int?) -> AnyLoader<Page<Post, Int>> { feed.page(at: offset) }
    /// A room of 100 messages, 10 a page, opened at the latest; cursors are offsets, as strings.
    func messages(in room: String, at cursor: String?) -> AnyLoader<Page<Message, String>> {
        let start = cursor.flatMap { Int($0) } ?? 90
        let page = Page(
            items: (start..<min(start + 10, 100)).map(Message.init),
            nextCursor: start + 10 < 100 ? "\(start + 10)" : nil,
            previousCursor: start > 0 ? "\(max(0, start - 10))" : nil)
        return answer(page)
    }
    func profile(_ id: String) -> AnyLoader<Profile> { answer(Profile(name: "Ada")) }
    func rename(_ id: String, to name: String) -> AnyLoader<Void> { answer(()) }
    func deleteFriend(_ id: String, idempotencyKey: String) -> AnyLoader<Void> {
        deleted.withLock { $0.append(id) }
        return answer(())
    }

    private func answer<Value: Sendable>(_ value: Value) -> AnyLoader<Value> {
        AnyLoader { completion in
            completion(.success(value))
            return AnyCancellationToken {}
        }
    }
}

final class ListsArticleSamplesTests: XCTestCase {
    func test_pages() async throws {
        let api = ArticleAPI()
        let editedPost = Post(id: 3, text: "edited")
        // Sample: begin
        let feed = PagedStore(
            levels: [.cache(MemoryCache<String, PagedList<Post, Int>>(), name: "memory")],
            maxPages: 10
        ) { (_: String, offset: Int?) in
            api.posts(after: offset)  // a Loader of Page<Post, Int>
        }
        let home = try await feed.loadNextPage(of: "home")  // page 1; called again, 2, 3...
        feed.store.update("home") { $0?.replacing(editedPost) }  // a live change, in the page that holds the post
        // Sample: end
        XCTAssertEqual(home.value?.items.count, 10, "the first page")
        let list = LoadRecorder<StoreResponse<PagedList<Post, Int>>>()
        _ = list.load(feed.store.read("home", policy: .cacheOnly))
        XCTAssertEqual(list.values.first?.value?.items.map(\.text)[3], "edited")
    }

    func test_pagesUpward() async throws {
        let api = ArticleAPI()
        // Sample: begin
        let chat = PagedStore(
            levels: [.cache(MemoryCache<String, PagedList<Message, String>>(), name: "memory")],
            maxPages: 20
        ) { (room: String, cursor: String?) in
            api.messages(in: room, at: cursor)  // nil: the latest; each page gives both cursors
        }
        try await chat.loadNextPage(of: "room-7")  // opens the room at the latest messages
        try await chat.loadPreviousPage(of: "room-7")  // older messages, above
        // Sample: end
        let list = LoadRecorder<StoreResponse<PagedList<Message, String>>>()
        _ = list.load(chat.store.read("room-7", policy: .cacheOnly))
        XCTAssertEqual(list.values.first?.value?.items.map(\.number), Array(80..<100))
        XCTAssertEqual(list.values.first?.value?.pages.first?.page.previousCursor, "70")
    }

    func test_invalidation() {
        let api = ArticleAPI()
        let profiles = Store<String, Profile>(levels: [], fetch: LoaderFamily { (id: String) in api.profile(id) })
        let observed = StreamRecorder(profiles.changes(for: "u1"))
        profiles.write(Profile(name: "Ada"), for: "u1")
        // Sample: begin
        api.rename("u1", to: "Ada L.").load { _ in profiles.invalidate("u1") }
        profiles.invalidate { $0.hasPrefix("search:") }  // every search result
        // Sample: end
        XCTAssertEqual(observed.values.count, 2, "written, then fetched anew")
    }

    func test_revalidation() {
        let api = ArticleAPI()
        // Sample: begin
        let connectivity = ManualConnectivity()
        let lifecycle = ManualAppLifecycle()
        let profiles = Store(
            levels: [.cache(MemoryCache<String, Profile>(), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.profile(id) },
            maxAge: .seconds(300),
            network: .answersFromCache(connectivity))
        let revalidation = profiles.revalidate(on: .foreground(lifecycle), .reconnect(connectivity))
        // Sample: end
        let observed = StreamRecorder(profiles.changes(for: "u1"))
        lifecycle.enterForeground()
        XCTAssertEqual(observed.values.map(\.value?.name), ["Ada"], "an observed key with no value is loaded")
        withExtendedLifetime(revalidation) {}
    }

    func test_mutationQueue() async throws {
        let api = ArticleAPI()
        let support = FileManager.default.temporaryDirectory.appendingPathComponent("article-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: support) }
        let friends = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        friends.write(["u1", "u3"], for: "all")
        let connectivity = ManualConnectivity()
        typealias APIError = ArticleAPIError
        // Sample: begin
        let outbox = try MutationQueue(
            store: friends,
            storage: FileMutationStorage<String>(directory: support.appendingPathComponent("deletes")),
            connectivity: connectivity,
            key: { _ in "all" },
            change: { id, list in list?.filter { $0.id != id } },
            send: { id, idempotencyKey in api.deleteFriend(id, idempotencyKey: idempotencyKey) },
            isRefused: { error in (error as? APIError)?.isRefusal == true })
        try await outbox.enqueue("u3")
        // Sample: end
        XCTAssertEqual(api.deleted.withLock { $0 }, ["u3"])
    }
}

extension String {
    /// Lets a list of ids stand in for a list of friends in the article's queue sample.
    fileprivate var id: String { self }
}

#if canImport(Observation)
    @MainActor
    final class ListsArticleObservationSamplesTests: XCTestCase {
        func test_observation() async {
            let profiles = Store<String, Profile>(
                levels: [], fetch: LoaderFamily { (id: String) in ArticleAPI().profile(id) })
            profiles.write(Profile(name: "Ada"), for: "u1")
            // Sample: begin
            let profile = ResourceModel(store: profiles, key: "u1")
            let name = profile.select { $0?.name }  // renders again only when the name changes
            profile.show("u2", of: profiles)  // u1 stays shown, loading, until u2 arrives
            // Sample: end
            XCTAssertEqual(name.value, "Ada")
            XCTAssertFalse(profile.isPlaceholder, "u2 was fetched at once")
        }
    }
#endif
