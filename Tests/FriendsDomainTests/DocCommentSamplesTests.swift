import Foundation
import FriendsDomain
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The code samples of FriendsDomain's doc comments (and the one of `CacheContract`, which uses its stores), as
// written there. `SampleInventoryTests` checks that every sample appears between the markers of some test.

private func render<T>(_ value: T) {}
private func show<T>(_ value: T) {}
private func showToast(_ event: FriendsRepository.Event) {}

final class FriendsDocCommentSamplesTests: XCTestCase {
    private let ada = makeFriend("u1", name: "Ada"), grace = makeFriend("u2", name: "Grace")

    // Sample: begin
    func test_cacheContract() {
        CacheContract(sampleValues: ([ada], [grace])) {
            let store = InMemoryFriendsStore()
            return (cache: LocalFriendsLoader(store: store), reader: LocalFriendsLoader(store: store))
        }.verify()
    }
    // Sample: end

    func test_composerAndItsParts() throws {
        let applicationSupport = FileManager.default.temporaryDirectory.appendingPathComponent(
            "doc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: applicationSupport, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: applicationSupport) }
        let url = applicationSupport.appendingPathComponent("cache.sqlite")
        let api = URL(string: "http://127.0.0.1:9")!

        // Sample: begin
        let composer = FriendsComposer(
            configuration: .init(
                baseURL: URL(string: "https://api.example.com")!,
                databaseURL: applicationSupport.appendingPathComponent("friends.sqlite")))
        composer.friendsLoader.load { result in render(result) }  // one list, on the main queue
        composer.friend(id: "u1").load { result in show(result) }  // one friend, from the list or the API
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            render(list)
        }  // then every change
        // Sample: end
        waitUntilRequestsStarted()
        subscription.cancel()
        do {
            // Sample: begin
            let memory = LocalFriendsLoader(store: InMemoryFriendsStore(), maxAge: .seconds(300))
            let database = LocalFriendsLoader(store: SQLiteFriendsStore(fileURL: url), maxAge: .seconds(86_400))
            let friends = memory.fallback(to: database.caching(to: memory))
            // Sample: end
            _ = friends
        }
        // Sample: begin
        let remote = RemoteFriendsLoader(baseURL: api, client: URLSessionHTTPClient(session: .shared))
        // Sample: end
        // Sample: begin
        let ada = RemoteFriendLoader(id: "u1", baseURL: api, client: URLSessionHTTPClient(session: .shared))
        // Sample: end
        _ = ada
        // Sample: begin
        let second = RemoteFriendsPageLoader(page: 2, baseURL: api, client: URLSessionHTTPClient(session: .shared))
        // Sample: end
        _ = second
        // Sample: begin
        let creator = RemoteFriendsCreator(baseURL: api, client: URLSessionHTTPClient(session: .shared))
        // Sample: end
        _ = creator
        // Sample: begin
        let renamer = RemoteFriendsRenamer(baseURL: api, client: URLSessionHTTPClient(session: .shared))
        // Sample: end
        _ = renamer
        do {
            // Sample: begin
            let database = FriendsCache(store: SQLiteFriendsStore(fileURL: url), expiry: .maxAge(.seconds(86_400)))
            let store = Store(
                levels: [.cache(database, name: "database")],
                fetch: LoaderFamily { (_: FriendsKey) in remote })
            // Sample: end
            _ = store
        }
        // Sample: begin
        let database = SQLiteFriendsStore(fileURL: applicationSupport.appendingPathComponent("friends.sqlite"))
        // Sample: end
        _ = database
        drainMainQueue()
    }

    func test_screens() {
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore.inMemory(),
            remote: AnyLoader { [] })
        // Sample: begin
        let repository = FriendsRepository(composer: composer)
        let subscription = repository.state.sink { render($0) }
        let toasts = repository.events.sink { event in showToast(event) }
        repository.load()
        repository.remove(id: "u1", optimistic: true)
        // Sample: end
        do {
            // Sample: begin
            let subscription = composer.sections().sections.sink { sections in render(sections) }
            // Sample: end
            subscription.cancel()
        }
        do {
            // Sample: begin
            let viewModel = FriendsViewModel(states: repository.state)
            let subscription = viewModel.viewStates.sink { state in render(state) }
            // Sample: end
            subscription.cancel()
        }
        drainMainQueue()  // the screens were shown what the repository published
        subscription.cancel()
        toasts.cancel()
    }

    func test_updates() throws {
        let api = URL(string: "http://127.0.0.1:9")!
        // Sample: begin
        var parser = ServerSentEventParser()
        let events = try parser.push(Array("event: upsert\ndata: {...}\n\n".utf8))
        // Sample: end
        XCTAssertEqual(events.count, 1)
        // Sample: begin
        let updates = ServerSentEventsFriendsUpdates(baseURL: api)
        let subscription = updates.updates().sink { _ in
        } receiveValue: { update in
            print(update)
        }
        // Sample: end
        waitUntilRequestsStarted()
        subscription.cancel()
    }

}
