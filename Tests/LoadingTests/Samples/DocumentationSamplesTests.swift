import Foundation
import Loading
import LoadingScreens
import LoadingTestSupport
import XCTest

// The README's and the articles' samples, as written there, with the few names they assume (an `api`, a `render`).
// `SampleInventoryTests` checks that every sample appears here or in another test between the markers.

struct Friend: Codable, Sendable, Equatable {
    enum Status: String, Codable, Sendable {
        case online, offline
    }

    var id: String
    var name: String
    var status: Status = .online
    var isPinned = false

    func renamed(_ name: String) -> Friend { Friend(id: id, name: name, status: status, isPinned: isPinned) }
}

struct Profile: Sendable, Equatable {
    var name: String
}

/// A friends API answering at once from what it holds.
final class FakeAPI: Sendable {
    private let friends = Locked(["u1": Friend(id: "u1", name: "Ada")])
    private let requests = Locked(0)

    var requestCount: Int { requests.withLock { $0 } }

    func friend(_ id: String) -> AnyLoader<Friend> {
        AnyLoader { [friends, requests] completion in
            requests.withLock { $0 += 1 }
            completion(friends.withLock { $0[id] }.map { .success($0) } ?? .failure(CacheMiss.absent))
            return AnyCancellationToken {}
        }
    }

    func rename(_ id: String, to name: String) -> AnyLoader<Void> {
        AnyLoader { [friends] completion in
            friends.withLock { $0[id]?.name = name }
            completion(.success(()))
            return AnyCancellationToken {}
        }
    }

    func profile(_ id: String) -> AnyLoader<Profile> {
        AnyLoader { completion in
            completion(.success(Profile(name: "Profile \(id)")))
            return AnyCancellationToken {}
        }
    }
}

/// What the samples render, for the tests to read.
final class Rendered: Sendable {
    private let lines = Locked<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    func removeAll() { lines.withLock { $0 = [] } }
}

private let rendered = Rendered()

private func show(_ result: Result<Friend, any Error>) { rendered.append("show \((try? result.get().name) ?? "-")") }

private func render(_ value: Friend?, origin: StoreOrigin, age: Duration? = nil) {
    rendered.append("\(value?.name ?? "nil") from \(origin)")
}

private func render(_ state: LoadingState<Friend>) { rendered.append("\(state)") }

/// What `memory` holds for `key` now (a memory cache answers at once).
private func heldValue<Value: Sendable>(of key: String, in memory: MemoryCache<String, Value>) -> Value? {
    let held = Locked<Value?>(nil)
    _ = memory[key].load { result in held.withLock { $0 = try? result.get() } }
    return held.withLock { $0 }
}

final class DocumentationSamplesTests: XCTestCase {
    override func setUp() {
        rendered.removeAll()
    }

    // README: keyed loads; CachingAndTheStore.md: the family
    func test_keyedFamily() throws {
        let api = FakeAPI()
        let caches = FileManager.default.temporaryDirectory.appendingPathComponent("samples-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: caches) }

        // Sample: begin
        let memory = MemoryCache<String, Friend>(countLimit: 500, expiry: .maxAge(.seconds(300)))
        let disk = DiskCache<String, Friend>(
            directory: caches.appendingPathComponent("friends"),
            expiry: .maxAge(.seconds(7 * 86_400)))
        let friend = LoaderFamily { (id: String) in
            memory[id]
                .fallback(to: disk[id].caching(to: memory[id]))
                .fallback(
                    to: api.friend(id)
                        .retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
                        .caching(to: disk[id])
                        .caching(to: memory[id]))
        }
        .coalesced()

        friend["u1"].load { result in show(result) }
        // Sample: end

        _ = eventually { !rendered.all.isEmpty }  // the disk cache misses on its own queue first

        XCTAssertEqual(rendered.all, ["show Ada"])
        XCTAssertEqual(heldValue(of: "u1", in: memory)?.name, "Ada")
    }

    // CachingAndTheStore.md: bounded caches, and a memory warning
    func test_boundedCaches() throws {
        let caches = FileManager.default.temporaryDirectory.appendingPathComponent("samples-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: caches) }
        let memory = MemoryCache<String, Friend>()
        let store = Store(
            levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { (id: String) in FakeAPI().friend(id) })
        store.write(Friend(id: "u1", name: "Ada"), for: "u1")
        XCTAssertEqual(heldValue(of: "u1", in: memory)?.name, "Ada")

        // Sample: begin
        let images = DiskCache<URL, Data>(directory: caches.appending(path: "images"), sizeLimit: 50_000_000)
        // Sample: end
        // Sample: begin
        memory.clear()
        store.trimMemory()
        // Sample: end

        XCTAssertNil(heldValue(of: "u1", in: memory))
        _ = images
    }

    // README: the store
    func test_store() async throws {
        let memory = MemoryCache<String, Friend>()
        let disk = MemoryCache<String, Friend>()
        let liveUpdate = Friend(id: "u1", name: "Ada Lovelace")
        let api = FakeAPI()

        // Sample: begin
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { (id: String) in api.friend(id) })
        let details = store.stream(for: "u1", policy: .cacheThenNetwork).sink { _ in
        } receiveValue: { response in
            render(response.value, origin: response.origin)  // the cached value, then the fresh one, then every change
        }
        store.write(liveUpdate, for: "u1")
        try await store.mutate("u1", { $0.map { $0.renamed("Ada L.") } }, commit: api.rename("u1", to: "Ada L."))
        await store.clear()  // logout: nothing written before reappears
        // Sample: end

        XCTAssertEqual(
            rendered.all,
            ["Ada from network", "Ada Lovelace from local", "Ada L. from local", "Ada L. from local", "nil from local"])
        details.cancel()
    }

    // CachingAndTheStore.md: the store, with a debounced level
    func test_storeWithADebouncedLevel() {
        let api = FakeAPI()
        let memory = MemoryCache<String, Friend>()
        let disk = MemoryCache<String, Friend>()

        // Sample: begin
        let store = Store(
            levels: [
                .cache(memory, name: "memory"),
                .cache(disk, name: "disk", debouncingWritesFor: .milliseconds(500), scheduler: .global()),
            ],
            fetch: LoaderFamily { (id: String) in api.friend(id) })

        let subscription = store.stream(for: "u1", policy: .cacheThenNetwork).sink { _ in
        } receiveValue: { response in
            render(response.value, origin: response.origin, age: response.age())
        }
        // Sample: end

        XCTAssertEqual(rendered.all, ["Ada from network"])
        subscription.cancel()
    }

    // CachingAndTheStore.md: screens
    @MainActor
    func test_screenOverAStoreKey() {
        let api = FakeAPI()
        let store = Store(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })

        // Sample: begin
        let subscription = store.states(for: "u1").sink(on: .main) { state in render(state.loadingState) }
        store.read("u1").load { _ in }
        // Sample: end

        XCTAssertEqual(store.state(for: "u1").value, Friend(id: "u1", name: "Ada"))
        subscription.cancel()
    }

    // Screens.md: the model
    @MainActor
    func test_modelOverAStoreKey() {
        let api = FakeAPI()
        let memory = MemoryCache<String, Friend>()
        let disk = MemoryCache<String, Friend>()

        // Sample: begin
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { (id: String) in api.friend(id) })

        let model = ResourceModel(store: store, key: "u1")  // on the main actor
        model.load()  // loading, then loaded or failed
        // Sample: end

        XCTAssertEqual(model.value, Friend(id: "u1", name: "Ada"))
    }

    // README: a screen
    @MainActor
    func test_screenOverAStore() {
        let edited = Profile(name: "Edited")
        let api = FakeAPI()

        // Sample: begin
        let profiles = Store(
            levels: [.cache(MemoryCache<String, Profile>(countLimit: 100), name: "memory")],
            fetch: LoaderFamily { (id: String) in
                api.profile(id).retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
            })

        let profile = ResourceModel(store: profiles, key: "me")  // @Observable, on the main actor
        profile.load()  // loading, then loaded (or failed, keeping the value)
        profiles.write(edited, for: "me")  // every change of "me" reaches the screen
        // Sample: end

        XCTAssertEqual(profile.value, edited)
    }
}
