// The README's samples, as written there, run against a stubbed server.

// Sample: begin
import Foundation
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct User: Codable, Sendable, Identifiable, Equatable {
    let id: String
    var name: String
}

/// The server: `GET users`, `GET users?page=N`, `GET users/{id}` and `PATCH users/{id}`, in JSON.
struct UsersAPI: Sendable {
    var baseURL = URL(string: "https://api.example.com/v1/")!
    var session = URLSession.shared

    func users(page: Int = 1) -> AnyLoader<[User]> { get("users?page=\(page)") }
    func user(_ id: String) -> AnyLoader<User> { get("users/\(id)") }

    func rename(_ id: String, to name: String) -> AnyLoader<Void> {
        AnyLoader { [baseURL, session] in
            var request = URLRequest(url: URL(string: "users/\(id)", relativeTo: baseURL)!)
            request.httpMethod = "PATCH"
            request.httpBody = try JSONEncoder().encode(["name": name])
            let (_, response) = try await session.data(for: request)
            guard (response as? HTTPURLResponse)?.statusCode == 204 else { throw URLError(.badServerResponse) }
        }
    }

    private func get<Value: Decodable & Sendable>(_ path: String) -> AnyLoader<Value> {
        AnyLoader { [baseURL, session] in
            let (data, response) = try await session.data(from: URL(string: path, relativeTo: baseURL)!)
            guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw URLError(.badServerResponse) }
            return try JSONDecoder().decode(Value.self, from: data)
        }
    }
}

let api = UsersAPI()
// Sample: end

/// Answers the README's `UsersAPI` as its server would: two users on page 1, none after, and renames accepted.
final class UsersServerStub: URLProtocol {
    private static let renames = Locked<[String]>([])

    /// The users renamed so far, by id, in the order the server was asked.
    static var renamed: [String] { renames.withLock { $0 } }

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [UsersServerStub.self]
        return URLSession(configuration: configuration)
    }

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let url = request.url!.absoluteURL
        let (status, body): (Int, String)
        switch (request.httpMethod ?? "GET", url.path, url.query) {
        case ("GET", "/v1/users", "page=1"):
            (status, body) = (200, #"[{"id":"u1","name":"Ada"},{"id":"u2","name":"Grace"}]"#)
        case ("GET", "/v1/users", _): (status, body) = (200, "[]")
        case ("GET", "/v1/users/u1", _): (status, body) = (200, #"{"id":"u1","name":"Ada"}"#)
        case ("PATCH", let path, _) where path.hasPrefix("/v1/users/"):
            Self.renames.withLock { $0.append(String(path.dropFirst("/v1/users/".count))) }
            (status, body) = (204, "")
        default: (status, body) = (404, "")
        }
        let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: nil)!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data(body.utf8))
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

final class ReadmeSamplesTests: XCTestCase {
    private let folders = ["users", "renames"].map { URL.temporaryDirectory.appendingPathComponent($0) }

    override func setUp() {
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
    }

    override func tearDown() {
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
    }

    func test_theSharedAPI_pointsAtTheServerOfTheSamples() {
        XCTAssertEqual(api.baseURL.absoluteString, "https://api.example.com/v1/")
        XCTAssertEqual(
            URL(string: "users/u1", relativeTo: api.baseURL)?.absoluteString, "https://api.example.com/v1/users/u1")
    }

    func test_aValueThroughAChainOfSources() async throws {
        let api = UsersAPI(baseURL: URL(string: "https://stub.local/v1/")!, session: UsersServerStub.session())

        // Sample: begin
        let memory = MemoryCache<String, [User]>()
        let disk = DiskCache<String, [User]>(directory: URL.temporaryDirectory.appendingPathComponent("users"))

        let everyone = memory["all"]
            .fallback(to: disk["all"].caching(to: memory["all"]))
            .fallback(
                to: api.users().retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
                    .caching(to: disk["all"])
                    .caching(to: memory["all"])
            )
            .dispatchOnMainQueue()

        everyone.load { result in print(result) }  // a callback; the token it returns cancels the load
        let list = try await everyone.load()  // async/await; cancelling the task cancels the load
        // Sample: end

        XCTAssertEqual(list.map(\.name), ["Ada", "Grace"])
        let inMemory = try await memory["all"].load()
        XCTAssertEqual(inMemory.map(\.name), ["Ada", "Grace"], "kept in memory")
        let onDisk = try await disk["all"].load()
        XCTAssertEqual(onDisk.map(\.name), ["Ada", "Grace"], "kept on disk")
    }

    @MainActor
    func test_valuesByKey_onAScreen_aPageAtATime_live_andOffline() async throws {
        let api = UsersAPI(baseURL: URL(string: "https://stub.local/v1/")!, session: UsersServerStub.session())

        // Sample: begin
        let users = Store(
            levels: [.cache(MemoryCache<String, User>(countLimit: 500), name: "memory")],
            fetch: LoaderFamily { (id: String) in api.user(id) })

        let ada = try await users.read("u1").load()  // the memory level, else the network; says which
        print(ada.value?.name ?? "none", ada.origin)
        users.write(User(id: "u1", name: "Ada L."), for: "u1")  // every observer of "u1" is shown it
        await users.clear()  // a logout: nothing from before reappears
        // Sample: end
        XCTAssertEqual(ada.value?.name, "Ada")
        XCTAssertEqual(shown(users, "u1"), nil, "cleared")

        #if canImport(Observation)
            // Sample: begin
            let profile = ResourceModel(store: users, key: "u1")  // @Observable, on the main actor
            profile.load()
            print(profile.value?.name ?? "…", profile.isLoading)
            // Sample: end
            let isShown = await eventuallyOnMainActor { profile.value != nil }
            XCTAssertTrue(isShown, "the screen shows u1")
            XCTAssertEqual(profile.value?.name, "Ada")
        #endif

        // Sample: begin
        let directory = PagedStore(levels: [.cache(MemoryCache<String, PagedList<User, Int>>(), name: "memory")]) {
            (_: String, page: Int?) in
            api.users(page: page ?? 1).map { users in
                Page(items: users, nextCursor: users.isEmpty ? nil : (page ?? 1) + 1)
            }
        }
        let firstPage = try await directory.loadNextPage(of: "everyone")  // called again: page 2, 3...
        print(firstPage.value?.items.count ?? 0, firstPage.value?.hasNextPage ?? false)
        // Sample: end
        XCTAssertEqual(firstPage.value?.items.map(\.id), ["u1", "u2"])
        XCTAssertEqual(firstPage.value?.hasNextPage, true)

        // Sample: begin
        let observer = users.changes(for: "u1").sink { response in print("u1 is now", response.value?.name ?? "gone") }
        users.update("u1") { user in user.map { User(id: $0.id, name: "Ada Lovelace") } }  // one event of a live feed
        observer.cancel()
        // Sample: end
        XCTAssertEqual(shown(users, "u1")?.name, "Ada Lovelace")

        // Sample: begin
        struct Rename: Codable, Sendable {
            let id: String
            let name: String
        }

        let renames = try MutationQueue(
            store: users,
            storage: FileMutationStorage<Rename>(directory: URL.temporaryDirectory.appendingPathComponent("renames")),
            key: { rename in rename.id },
            change: { rename, user in user.map { User(id: $0.id, name: rename.name) } },
            send: { rename, _ in api.rename(rename.id, to: rename.name) },
            isRefused: { error in (error as? URLError)?.code == .badServerResponse })
        try await renames.enqueue(Rename(id: "u1", name: "Ada Lovelace"))  // shown at once; sent when online
        // Sample: end
        XCTAssertEqual(shown(users, "u1")?.name, "Ada Lovelace", "shown at once")
        let isSent = await eventuallyOnMainActor { UsersServerStub.renamed.contains("u1") }
        XCTAssertTrue(isSent, "the server renamed u1")
        withExtendedLifetime(renames) {}
    }

    /// What the store shows for `key` now.
    private func shown<Key, Value>(_ store: Store<Key, Value>, _ key: Key) -> Value? {
        let value = Locked<Value?>(nil)
        let subscription = store.changes(for: key).sink { response in value.withLock { $0 = response.value } }
        subscription.cancel()
        return value.withLock { $0 }
    }
}
