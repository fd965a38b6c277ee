import Dispatch
import Foundation
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The code samples of the doc comments of `Loading` and `LoadingTestSupport`, as written there, each in its own
// test with the few names it assumes (an `api`, `memory`, `render`...). `SampleInventoryTests` checks that every
// sample appears between the markers of some test.

// MARK: The names the samples assume

private let docAda = Friend(id: "u1", name: "Ada")
private let docGrace = Friend(id: "u2", name: "Grace")

/// A loader that answers at once.
private func answering<Value: Sendable>(_ value: Value) -> AnyLoader<Value> {
    AnyLoader { completion in
        completion(.success(value))
        return AnyCancellationToken {}
    }
}

private struct DocAPI: Sendable {
    func fetchFriends(completion: @escaping @Sendable (Result<[Friend], any Error>) -> Void) {
        completion(.success([docAda]))
    }
    func fetch(completion: @escaping @Sendable (Result<[Friend], any Error>) -> Void) { completion(.success([docAda])) }
    func friends() async throws -> [Friend] { [docAda] }
    func friends() -> AnyLoader<[Friend]> { answering([docAda]) }
    func friends(authorizedBy token: String) -> AnyLoader<[Friend]> { answering([docAda]) }
    func friends(_ session: String) -> AnyLoader<[Friend]> { answering([docAda]) }
    func friend(_ id: String) -> AnyLoader<Friend> { answering(Friend(id: id, name: "Ada")) }
    func rename(_ id: String, to name: String) -> AnyLoader<Void> { answering(()) }
    func users() -> EventStream<[String], any Error> { .just(["Ada"]) }
}

/// What the system hands an app's background refresh (`BGAppRefreshTask`), for the samples.
private final class BackgroundRefreshTask: Sendable {
    private let handler = Locked<(@Sendable () -> Void)?>(nil)
    private let outcome = Locked<Bool?>(nil)

    var expirationHandler: (@Sendable () -> Void)? {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    var succeeded: Bool? { outcome.withLock { $0 } }

    func setTaskCompleted(success: Bool) {
        outcome.withLock { $0 = success }
    }
}

private typealias Token = String

private struct Metrics: Sendable {
    func begin(_ name: String) {}
    func end(_ name: String, count: Int) {}
}

private struct Logger: Sendable {
    func error(_ message: String) {}
}

private enum FriendsError: Error {
    case network(any Error)
    case unavailable(underlying: any Error)
}

private struct FriendRow: Sendable {
    let title: String
    init(_ friend: Friend) { title = friend.name }
}

private struct Page: Decodable, Sendable {
    let items: [String]
}

private struct Authenticator: Sendable {
    func authenticate() async throws -> String { "session" }
}

private struct Auth: Sendable {
    func signIn() async throws -> String { "session" }
    func signIn(completion: @escaping @Sendable (Result<String, any Error>) -> Void) { completion(.success("t")) }
}

private struct QuoteClient: Sendable {
    func quote() async throws -> String { RequestID.current ?? "none" }
}

private enum RequestID {
    @TaskLocal static var current: String?
}

private final class Timer: Sendable {
    func invalidate() {}
}

private func startTimer(_ tick: @escaping @Sendable (Int) -> Void) -> Timer {
    tick(1)
    return Timer()
}

private struct Composer: Sendable {
    func friendsStream() -> EventStream<[Friend], any Error> { .just([docAda]) }
}

private enum FriendEvent: Sendable {
    case upsert(Friend)
    case remove(String)

    var upsertedFriend: Friend? {
        if case .upsert(let friend) = self { return friend }
        return nil
    }
}

private enum ListUpdate: Sendable {
    case append(Friend)
}

extension [Friend] {
    fileprivate func applying(_ update: ListUpdate) -> [Friend] {
        switch update {
        case .append(let friend): self + [friend]
        }
    }
}

private let metrics = Metrics()
private let logger = Logger()

private func show<T>(_ value: T) {}
private func show<T>(_ value: T, banner: any Error) {}
private func showPlaceholder() {}
private func showSpinner<T>(over value: T) {}
private func render<T>(_ value: T) {}
private func render<T>(_ value: T, from origin: StoreOrigin) {}
private func render<T>(_ value: T, spinner: Bool, banner: (any Error)?) {}
private func endRefreshing<T>(_ result: T) {}

// MARK: Samples declaring types

// Sample: begin
@MainActor final class FriendScreen {
    let model: ResourceModel<String>

    init(store: Store<String, String>) {
        model = ResourceModel(store: store, key: "u1")
    }

    func appeared() {
        model.load()  // loading, then loaded (or failed, keeping the value shown)
    }

    func pulledToRefresh() async {
        await model.refresh()  // a fresh value, never absorbed by a load already running
    }

    func tappedRetry() {
        Task { await model.refresh() }
    }
}
// Sample: end

// Sample: begin
struct QuoteLoader: Loader {
    let session: URLSession
    let url: URL

    func load(completion: @escaping LoadCompletion<Data>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        pending.startStep {
            let task = session.dataTask(with: url) { data, _, error in
                pending.complete(data.map { .success($0) } ?? .failure(error ?? URLError(.badServerResponse)))
            }
            task.resume()
            return AnyCancellationToken { task.cancel() }
        }
        return pending
    }
}
// Sample: end

final class DocCommentSamplesTests: XCTestCase {
    private let api = DocAPI()

    // MARK: Essentials

    func test_anyLoader() async throws {
        let api = self.api
        // Sample: begin
        let fromCallback = AnyLoader<[Friend]> { completion in
            api.fetchFriends(completion: completion)
            return AnyCancellationToken {}
        }
        let fromAsync = AnyLoader { try await api.friends() }
        // Sample: end
        let first = try await fromCallback.load()
        let second = try await fromAsync.load()
        XCTAssertEqual(first, second)
    }

    func test_loadingError() async throws {
        let store = Store<String, Friend>(
            levels: [], fetch: LoaderFamily { _ in AnyLoader<Friend> { throw TimeoutError(interval: .seconds(5)) } })
        // Sample: begin
        do {
            _ = try await store.refresh("u1")
        } catch let error as any LoadingError {
            print(error.localizedDescription)  // what went wrong, as a sentence
        }
        // Sample: end
        do {
            _ = try await store.refresh("u1")
            XCTFail("The fetch fails.")
        } catch let error as any LoadingError {
            XCTAssertEqual(error.localizedDescription, TimeoutError(interval: .seconds(5)).description)
        }
    }

    func test_anyCache() async throws {
        // Sample: begin
        let store = QuoteStore()  // an actor with `func save(_ quotes: [String])`
        let cache = AnyCache<[String]> { quotes in await store.save(quotes) }
        // Sample: end
        let saved = expectation(description: "saved")
        cache.save(["q"]) { _ in saved.fulfill() }
        await fulfillment(of: [saved], timeout: .watchdog)
    }

    func test_cancellationTokens() {
        let friends = LoaderSpy<[Friend]>()
        let session = URLSession(configuration: .ephemeral)
        let url = URL(string: "http://127.0.0.1:9/")!
        // Sample: begin
        let token = friends.load { result in show(result) }
        token.cancel()  // `show` will not be called
        // Sample: end
        // Sample: begin
        let page = AnyLoader<Data> { completion in
            let task = session.dataTask(with: url) { data, _, error in
                completion(data.map { .success($0) } ?? .failure(error ?? URLError(.badServerResponse)))
            }
            task.resume()
            return AnyCancellationToken { task.cancel() }
        }
        // Sample: end
        _ = page  // not run: FoundationNetworking on Linux can crash when a data task is cancelled as it starts
        XCTAssertEqual(friends.cancelledRequests, [0])
    }

    func test_loaderAndLocked() {
        let memory = InMemoryCache<[Friend]>()
        let database = InMemoryCache<[Friend]>()
        let remote = answering([docAda])
        // Sample: begin
        let friends =
            memory
            .fallback(to: database.caching(to: memory))
            .fallback(
                to: remote.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
                    .caching(to: database)
                    .caching(to: memory)
            )
            .dispatchOnMainQueue()
        // Sample: end
        // Sample: begin
        let hits = Locked(0)
        hits.withLock { $0 += 1 }
        // Sample: end
        // Sample: begin
        let handlers = Locked<[@Sendable () -> Void]>([])
        let taken = handlers.withLock { handlers in
            defer { handlers = [] }
            return handlers
        }
        for handler in taken { handler() }  // called, then released, after unlocking
        // Sample: end
        _ = friends
        XCTAssertEqual(hits.withLock { $0 }, 1)
    }

    func test_pendingLoad() {
        // Built, not run (see test_cancellationTokens); PendingLoad's contract has its own tests.
        let loader = QuoteLoader(
            session: URLSession(configuration: .ephemeral), url: URL(string: "http://127.0.0.1:9")!)
        XCTAssertEqual(loader.url.port, 9)
    }

    // MARK: Bridges

    @MainActor
    func test_streamAsLoader() {
        let liveFriends = EventStream<[Friend], any Error>.just([docAda])
        // Sample: begin
        let latest = ResourceModel(loader: liveFriends.asLoader())  // each load takes the stream's first value
        // Sample: end
        latest.load()
        XCTAssertEqual(latest.value, [docAda])
    }

    func test_bridges() async throws {
        let composer = Composer()
        let auth = Auth()
        let friendsLoader = answering([docAda])
        let memory = InMemoryCache<[Friend]>()
        let database = InMemoryCache<[Friend]>([docGrace])
        // Sample: begin
        for try await list in composer.friendsStream().values {
            render(list)
        }
        // Sample: end
        // Sample: begin
        let session = try await EventStream.task { try await auth.signIn() }.value
        // Sample: end
        // Sample: begin
        let friends = try await friendsLoader.load()
        // Sample: end
        XCTAssertEqual(session, "session")
        XCTAssertEqual(friends, [docAda])
        do {
            // Sample: begin
            let friends = memory.asStream()
                .fallback(to: database.asStream().caching(to: memory))
            // Sample: end
            let list = try await friends.value
            XCTAssertEqual(list, [docGrace])
        }
    }

    // MARK: Composites

    func test_composites() {
        let api = LoaderSpy<[Friend]>()
        let remoteLoader = answering([docAda])
        let memory = InMemoryCache<[Friend]>()
        let database = InMemoryCache<[Friend]>()
        let session = answering("token")
        let saveQueue = DispatchQueue(label: "saves")
        let docAPI = self.api
        do {
            // Sample: begin
            let remote = remoteLoader.caching(to: database).caching(to: memory)
            // Sample: end
            // Sample: begin
            let friends = memory.fallback(to: database).fallback(to: remote)
            // Sample: end
            // Sample: begin
            let measured = remote.handleEvents(
                onStart: { metrics.begin("friends") },
                onValue: { metrics.end("friends", count: $0.count) })
            // Sample: end
            // Sample: begin
            let names = friends.map { $0.map(\.name) }
            // Sample: end
            // Sample: begin
            let typed = remote.mapError { FriendsError.unavailable(underlying: $0) }
            // Sample: end
            // Sample: begin
            let saves = database.receive(on: .queue(saveQueue))
            // Sample: end
            // Sample: begin
            friends.dispatchOnMainQueue().load { result in render(result) }
            // Sample: end
            _ = (measured, names, typed, saves)
        }
        do {
            let api = docAPI
            // Sample: begin
            let friends = session.flatMap { token in api.friends(authorizedBy: token) }
            // Sample: end
            _ = friends
        }
        do {
            let updates = api
            // Sample: begin
            let remote = api.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
            let live = updates.retry(.constant(.seconds(1), maxAttempts: .max), scheduler: .global())
            // Sample: end
            _ = (remote, live)
        }
        do {
            let api = docAPI
            // Sample: begin
            let remote = AnyLoader { try await api.friends() }.timeout(after: .seconds(10))
            let polled = remote.timeout(after: .seconds(30), scheduler: .global())
            // Sample: end
            _ = polled
        }
    }

    func test_tryMapAndRetryPolicies() {
        let friends = answering([docAda])
        let remote = LoaderSpy<[Friend]>()
        let liveUpdates = StreamSubject<Friend, any Error>().stream
        // Sample: begin
        let first = friends.tryMap { friends in
            guard let friend = friends.first else { throw CacheMiss.absent }
            return friend
        }
        // Sample: end
        do {
            // Sample: begin
            let friends = remote.retry(.exponential(initial: .milliseconds(200), maxDelay: .seconds(5), maxAttempts: 4))
            let patient = remote.retry(.constant(.seconds(1), maxAttempts: 3).retrying { $0 is TimeoutError })
            // for ever
            let live = liveUpdates.retry(.exponential(initial: .seconds(1), maxAttempts: .max), scheduler: .global())
            // Sample: end
            _ = (friends, patient, live)
        }
        // Sample: begin
        let observed = remote.retry(
            .constant(.seconds(1), maxAttempts: 3).observingRetries { retry, delay, error in
                print("retry \(retry) in \(delay) after \(error)")
            })
        // Sample: end
        _ = (first, observed)
    }

    func test_tracing() {
        let memory = InMemoryCache<[Friend]>()
        let remote = answering([docAda])
        let log: @Sendable (LoadEvent) -> Void = { _ in }
        do {
            // Sample: begin
            let friends = TracedLoader("friends", observer: log) { trace in
                memory.step("memory", of: trace)
                    .fallback(
                        to: remote.retry(.immediate(maxAttempts: 2).reporting(to: trace)).step("network", of: trace))
            }
            // Sample: end
            _ = friends
        }
        do {
            // Sample: begin
            let log: @Sendable (LoadEvent) -> Void = { event in print(event.load, event.elapsed, event.kind) }
            let friends = TracedLoader("friends", observer: log) { trace in
                memory.step("memory", of: trace)
                    .fallback(
                        to: remote.retry(.immediate(maxAttempts: 2).reporting(to: trace)).step("network", of: trace))
            }
            // Sample: end
            _ = friends
        }
    }

    // MARK: Keyed

    func test_keyed() throws {
        let api = self.api
        let caches = FileManager.default.temporaryDirectory.appendingPathComponent("doc-\(UUID().uuidString)")
        let folder = caches
        defer { try? FileManager.default.removeItem(at: caches) }
        let id = "u1"
        let ada = docAda
        do {
            // Sample: begin
            let disk = DiskCache<String, Friend>(
                directory: caches.appending(path: "friends"), expiry: .maxAge(.seconds(604_800)))
            let friend = disk["u1"].fallback(to: api.friend("u1").caching(to: disk["u1"]))
            // Sample: end
            _ = friend
        }
        do {
            // Sample: begin
            let images = DiskCache<URL, Data>(directory: caches.appending(path: "images"), sizeLimit: 50_000_000)
            // Sample: end
            _ = images
        }
        do {
            let memory = MemoryCache<String, Friend>()
            // Sample: begin
            let friend = memory[id].fallback(to: api.friend(id).caching(to: memory[id]))
            // Sample: end
            // Sample: begin
            let entry = memory["u1"]
            entry.load { result in show(result) }  // the value, or CacheMiss
            entry.save(ada) { _ in }  // stored under "u1"
            // Sample: end
            _ = friend
        }
        do {
            // Sample: begin
            let memory = MemoryCache<String, Friend>(expiry: .maxAge(.seconds(300)))
            let disk = DiskCache<String, Friend>(
                directory: folder, expiry: .validate { friend, savedAt, now in friend.isPinned })
            // Sample: end
            _ = (memory, disk)
        }
        do {
            let memory = MemoryCache<String, Friend>()
            let disk = MemoryCache<String, Friend>()
            // Sample: begin
            let friend = LoaderFamily { (id: String) in
                memory[id]
                    .fallback(to: disk[id].caching(to: memory[id]))
                    .fallback(to: api.friend(id).caching(to: disk[id]).caching(to: memory[id]))
            }
            .coalesced()  // one upstream load per key in flight, for every caller

            friend["u1"].load { result in show(result) }
            // Sample: end
        }
        do {
            // Sample: begin
            let memory = MemoryCache<String, Friend>(countLimit: 500, expiry: .maxAge(.seconds(300)))
            let friend = memory["u1"].fallback(to: api.friend("u1").caching(to: memory["u1"]))
            // Sample: end
            _ = friend
        }
    }

    func test_store() {
        let api = self.api
        let memory = MemoryCache<String, Friend>()
        let disk = MemoryCache<String, Friend>()
        let updatedAda = Friend(id: "u1", name: "Ada Lovelace")
        // Sample: begin
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { (id: String) in api.friend(id) })

        let subscription = store.stream(for: "u1", policy: .cacheThenNetwork).sink { _ in
        } receiveValue: { response in
            render(response.value, from: response.origin)  // the cached value, then the fresh one, then every change
        }
        store.write(updatedAda, for: "u1")  // a live update: saved to both levels and shown
        store.mutate("u1", { $0.map { $0.renamed("Ada L.") } }, commit: api.rename("u1", to: "Ada L."))
        store.clear()  // logout: nothing written before reappears
        // Sample: end
        do {
            // Sample: begin
            let subscription = store.changes(for: "u1").sink { response in render(response.value) }
            // Sample: end
            subscription.cancel()
        }
        subscription.cancel()
    }

    func test_pagedStore_loadsNow_orAsALoader() {
        let feeds = PagedStore(levels: [.cache(MemoryCache<String, PagedList<Int, Int>>(), name: "memory")]) {
            (_: String, cursor: Int?) in
            AnyLoader<Loading.Page<Int, Int>> { completion in
                completion(.success(Loading.Page(items: [cursor ?? 0], nextCursor: (cursor ?? 0) + 1)))
                return AnyCancellationToken {}
            }
        }
        let shown = Locked<[[Int]]>([])
        let show: @Sendable (Result<StoreResponse<PagedList<Int, Int>>, any Error>) -> Void = { result in
            shown.withLock { $0.append((try? result.get().value?.items) ?? []) }
        }
        // Sample: begin
        feeds.nextPage(of: "home").load { result in show(result) }
        // Sample: end
        // Sample: begin
        let next = feeds.nextPage(of: "home").dispatchOnMainQueue()
        // Sample: end
        XCTAssertEqual(shown.withLock { $0 }, [[0]], "loaded at once, without a load of a loader")
        _ = next
        let chat = feeds
        // Sample: begin
        chat.previousPage(of: "room-7").load { result in show(result) }  // older messages, above
        // Sample: end
        XCTAssertEqual(shown.withLock { $0 }, [[0], [0]], "the first page of another key")
    }

    func test_revalidationWithinABudget() async {
        let api = self.api
        let store = Store(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })
        store.write(docAda, for: "u1")
        store.changes(for: "u1").sink { _ in }.cancel()
        store.invalidate("u1")
        let task = BackgroundRefreshTask()
        // Sample: begin
        let refresh = Task { await store.revalidate(within: .seconds(25)) }
        task.expirationHandler = { refresh.cancel() }  // the system wants the time back: stop
        let report = await refresh.value
        task.setTaskCompleted(success: report.failed.isEmpty)
        // Sample: end
        XCTAssertEqual(report.refreshed, ["u1"])
        XCTAssertEqual(task.succeeded, true)
    }

    func test_sendingWithinABudget() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sample-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        let friends = Store<String, [Friend]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[Friend]>() })
        friends.write([docAda], for: "all")
        let outbox = try MutationQueue(
            store: friends, storage: FileMutationStorage<String>(directory: folder), key: { _ in "all" },
            change: { id, list in list?.filter { $0.id != id } }, send: { _, _ in answering(()) },
            isRefused: { _ in false })
        try await outbox.enqueue(docAda.id)
        let task = BackgroundRefreshTask()
        // Sample: begin
        let sending = Task { await outbox.sendPending(within: .seconds(25)) }
        task.expirationHandler = { sending.cancel() }  // the system wants the time back: stop
        let report = await sending.value
        task.setTaskCompleted(success: report.failure == nil)
        // Sample: end
        XCTAssertEqual(report.remaining.count, 0)
        XCTAssertEqual(task.succeeded, true)
    }

    func test_storeStates() {
        let api = self.api
        let store = Store(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) })
        do {
            // Sample: begin
            let subscription = store.states(for: "u1").sink { state in
                render(state.value, spinner: state.isLoading, banner: state.error)
            }
            store.read("u1").load { _ in }  // the store reads the key; its states follow, whoever asked
            // Sample: end
            subscription.cancel()
        }
        // Sample: begin
        let subscription = store.states(for: "u1").sink { state in
            switch state.loadingState {
            case .idle: showPlaceholder()
            case .loading(let previous): showSpinner(over: previous)
            case .loaded(let friend): show(friend)
            case .failed(let error, let previous): show(previous, banner: error)
            }
        }
        store.read("u1").load { _ in }
        // Sample: end
        subscription.cancel()
        // Sample: begin
        render(store.state(for: "u1").loadingState)
        // Sample: end
    }

    // MARK: Presentation

    func test_presentation() {
        let state = LoadingState<[Friend]>.idle
        let friends = answering([docAda])
        // Sample: begin
        switch state {
        case .idle: showPlaceholder()
        case .loading(let previous): showSpinner(over: previous)
        case .loaded(let friends): show(friends)
        case .failed(let error, let previous): show(previous, banner: error)
        }
        // Sample: end
        do {
            // Sample: begin
            let sections = SectionedSource([
                TitledSource(title: "Online", loader: friends.map { $0.filter { $0.status == .online } }),
                TitledSource(title: "All friends", loader: friends),
            ])
            let subscription = sections.sections.sink { sections in render(sections) }
            // Sample: end
            subscription.cancel()
        }
    }

    // MARK: Scheduling

    func test_scheduling() async throws {
        let loader = answering(1)
        let client = QuoteClient()
        // Sample: begin
        let saved = loader.receive(on: .queue(DispatchQueue(label: "saves")))
        // Sample: end
        // Sample: begin
        let upstream = AnyLoader { try await client.quote() }
            .timeout(after: .seconds(2), scheduler: .task)
            .retry(.exponential(initial: .milliseconds(100), maxAttempts: 3), scheduler: .task)
        // every attempt sees it
        let quote = try await RequestID.$current.withValue("req-42") { try await upstream.load() }
        // Sample: end
        _ = saved
        XCTAssertEqual(quote, "req-42")
    }

    // MARK: Streams

    func test_streamCreation() async throws {
        let api = self.api
        let authenticator = Authenticator()
        let auth = Auth()
        // Sample: begin
        let load = EventStream.deferred { EventStream.future { promise in api.fetch(completion: promise) } }
        // Sample: end
        // Sample: begin
        let numbers = EventStream<Int, Never>.sequence([1, 2, 3])
        // Sample: end
        // Sample: begin
        let users = EventStream.task { try await authenticator.authenticate() }
            .flatMap { _ in api.users() }
        // Sample: end
        // Sample: begin
        let (ticks, continuation) = AsyncStream.makeStream(of: Int.self)
        let stream = EventStream.elements(of: ticks)
        continuation.yield(1)
        // Sample: end
        // Sample: begin
        let token = EventStream<Token, any Error>.future { promise in auth.signIn(completion: promise) }
        // Sample: end
        let loaded = try await load.value
        let names = try await users.value
        let signedIn = try await token.value
        XCTAssertEqual(loaded, [docAda])
        XCTAssertEqual(names, ["Ada"])
        XCTAssertEqual(signedIn, "t")
        _ = (numbers, stream)
    }

    func test_streamCore() {
        var subscriptions = Set<StreamSubscription>()
        let friends = EventStream<[Friend], any Error>.just([docAda])
        let subject = StreamSubject<Int, Never>()
        // Sample: begin
        friends.sink { completion in
            if case .failure(let error) = completion { show(error) }
        } receiveValue: { list in
            show(list)
        }
        .store(in: &subscriptions)
        // Sample: end
        // Sample: begin
        let subscription = subject.stream.sink { print($0) }
        // Sample: end
        do {
            // Sample: begin
            let subscription = EventStream<Int, Never>.sequence(1...5)
                .filter { $0.isMultiple(of: 2) }
                .map { $0 * 10 }
                .sink { print($0) }  // 20, 40
            // Sample: end
            subscription.cancel()
        }
        // Sample: begin
        let ticks = EventStream<Int, Never> { observer in
            let timer = startTimer { tick in observer.send(tick) }
            observer.onTermination { timer.invalidate() }
        }
        // Sample: end
        let recorder = StreamRecorder(ticks)
        XCTAssertEqual(recorder.values, [1])
        XCTAssertEqual(subscriptions.count, 1)
        subscription.cancel()
    }

    func test_streamOperators() {
        let api = self.api
        let memory = InMemoryCache<[Friend]>()
        let database = InMemoryCache<[Friend]>()
        let remote = answering([docAda])
        let liveLists = StreamSubject<[Friend], any Error>().stream
        let updatedLists = StreamSubject<[Friend], Never>().stream
        let events = StreamSubject<FriendEvent, Never>().stream
        let authenticator = Authenticator()
        let friends = EventStream<[Friend], any Error>.just([docAda])
        let updates = StreamSubject<ListUpdate, Never>().stream
        let memoryUpdates = StreamSubject<Friend, Never>().stream
        let networkUpdates = memoryUpdates
        let localEdits = memoryUpdates
        let loadedFriends = friends
        let liveUpdates = StreamSubject<[Friend], any Error>().stream
        let liveEvents = StreamSubject<FriendEvent, any Error>().stream
        let responses = StreamSubject<Data, any Error>().stream
        do {
            // Sample: begin
            let fresh = remote.asStream().caching(to: database).caching(to: memory)
            // Sample: end
            // Sample: begin
            let saved = liveLists.caching(to: memory).caching(
                to: database, debounce: .milliseconds(500), scheduler: .global())
            // Sample: end
            // Sample: begin
            let friends = memory.asStream().catch { _ in database.asStream() }
            // Sample: end
            // Sample: begin
            let upserted = events.compactMap { $0.upsertedFriend }
            // Sample: end
            // Sample: begin
            let cachedThenFresh = memory.asStream().replaceError(with: []).setFailureType(to: (any Error).self)
                .concat(remote.asStream())
            // Sample: end
            // Sample: begin
            let saving = updatedLists.debounce(for: .milliseconds(500), scheduler: .global())
                .sink { list in database.save(list) { _ in } }  // a handful of writes for a burst of updates
            // Sample: end
            saving.cancel()
            _ = (fresh, saved, friends, upserted, cachedThenFresh)
        }
        do {
            // Sample: begin
            let friends = memory.asStream()
                .fallback(to: database.asStream().caching(to: memory))
                .fallback(to: remote.asStream().caching(to: database).caching(to: memory))
            // Sample: end
            _ = friends
        }
        // Sample: begin
        let nonEmpty = friends.filter { !$0.isEmpty }
        // Sample: end
        do {
            let updates = memoryUpdates
            // Sample: begin
            let subscription = updates.first().sink { print("first update: \($0)") }
            // Sample: end
            subscription.cancel()
        }
        do {
            // Sample: begin
            let friends = EventStream.task { try await authenticator.authenticate() }
                .flatMap { session in api.friends(session).asStream() }
            // Sample: end
            _ = friends
        }
        do {
            let remote = remote.asStream()
            // Sample: begin
            let saved = remote.handleEvents(receiveOutput: { friends in database.save(friends) { _ in } })
            // Sample: end
            _ = saved
        }
        // Sample: begin
        let rows = friends.map { $0.map(FriendRow.init) }
        // Sample: end
        // Sample: begin
        let typed = api.friends().asStream().mapError { FriendsError.network($0) }
        // Sample: end
        do {
            // Sample: begin
            let updates = EventStream.merge([memoryUpdates, networkUpdates, localEdits])
            // Sample: end
            _ = updates
        }
        do {
            // Sample: begin
            let friends = loadedFriends.merge(with: liveUpdates)
            // Sample: end
            _ = friends
        }
        do {
            let friends = EventStream<[Friend], Never>.just([docAda])
            // Sample: begin
            let subscription = friends.receive(on: .main).sink { list in render(list) }
            // Sample: end
            subscription.cancel()
        }
        do {
            // Sample: begin
            let lists = friends.removeDuplicates()  // no re-render when a refresh returns the same list
            // Sample: end
            _ = lists
        }
        do {
            // Sample: begin
            let lists = friends.replaceError(with: [])
            // Sample: end
            _ = lists
        }
        do {
            // Sample: begin
            let friends = EventStream.deferred { api.friends().asStream() }.retry(.immediate(maxAttempts: 3))
            // Sample: end
            _ = friends
        }
        // Sample: begin
        let live = liveEvents.retry(
            .exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: .max)
                .resettingAttempts(after: .seconds(10)),
            scheduler: .global())
        // Sample: end
        do {
            let loadedFriends = [docAda]
            // Sample: begin
            let lists = updates.scan(loadedFriends) { friends, update in friends.applying(update) }
            // Sample: end
            _ = lists
        }
        // Sample: begin
        let pages = responses.tryMap { try JSONDecoder().decode(Page.self, from: $0) }
        // Sample: end
        _ = (nonEmpty, rows, typed, live, pages)
    }

    func test_subjects() {
        // Sample: begin
        let state = CurrentValueStreamSubject<LoadingState<[Friend]>, Never>(.idle)
        let subscription = state.stream.sink { render($0) }  // .idle at once
        state.send(.loading(previous: nil))
        // Sample: end
        let ada = docAda
        do {
            // Sample: begin
            let updates = StreamSubject<Friend, Never>()
            let subscription = updates.stream.sink { print($0.name) }
            updates.send(ada)
            // Sample: end
            subscription.cancel()
        }
        subscription.cancel()
    }

    // MARK: Test kit

    func test_eventually() {
        // Sample: begin
        let done = Locked(false)
        DispatchQueue.global().async { done.withLock { $0 = true } }
        XCTAssertTrue(eventually { done.withLock { $0 } })
        // Sample: end
    }

    // Sample: begin
    @MainActor func test_screenShowsTheList() async {
        let shown = Locked(false)
        DispatchQueue.main.async { shown.withLock { $0 = true } }
        let appeared = await eventuallyOnMainActor { shown.withLock { $0 } }
        XCTAssertTrue(appeared)
    }
    // Sample: end

    func test_testKit() {
        let ada = docAda
        let spy = LoaderSpy<[Friend]>()
        let friendsLoader = spy
        let anyError = CacheMiss.absent
        let sut = spy
        do {
            // Sample: begin
            let network = KeyedLoaderSpy<String, Friend>()
            let friend = LoaderFamily { network[$0] }.coalesced()
            let recorder = LoadRecorder<Friend>()
            recorder.load(friend["u1"])
            recorder.load(friend["u1"])
            network.complete("u1", with: ada)
            XCTAssertEqual(network.loadCount(for: "u1"), 1)
            // Sample: end
        }
        do {
            // Sample: begin
            let recorder = LoadRecorder<[Friend]>()
            let token = recorder.load(friendsLoader)
            spy.complete(with: [ada])
            XCTAssertEqual(recorder.values, [[ada]])
            // Sample: end
            _ = token
        }
        do {
            // Sample: begin
            let primary = LoaderSpy<[String]>()
            let secondary = LoaderSpy<[String]>()
            let recorder = LoadRecorder<[String]>()
            let token = recorder.load(primary.fallback(to: secondary))
            primary.fail(with: URLError(.notConnectedToInternet))  // the first request fails...
            XCTAssertEqual(secondary.loadCount, 1)  // ...so the fallback starts
            token.cancel()
            XCTAssertEqual(secondary.cancelledRequests, [0])
            XCTAssertEqual(recorder.count, 0)
            // Sample: end
        }
        do {
            // Sample: begin
            let token = sut.load { _ in }
            trackForMemoryLeaks(token as AnyObject)
            // Sample: end
            token.cancel()
        }
        do {
            // Sample: begin
            let recorder = StreamRecorder(EventStream<Int, Never>.sequence([1, 2]))
            XCTAssertEqual(recorder.events, [.value(1), .value(2), .completion(.finished)])
            // Sample: end
        }
        do {
            // Sample: begin
            let clock = TestClock()
            let memory = MemoryCache<String, Int>(expiry: .maxAge(.seconds(60)), now: { clock.now })
            clock.advance(by: 61)  // what memory holds has now expired
            // Sample: end
            _ = memory
        }
        do {
            let spy = LoaderSpy<Int>()
            // Sample: begin
            let scheduler = TestScheduler()
            let loader = spy.retry(.constant(.seconds(1), maxAttempts: 2), scheduler: scheduler)
            loader.load { _ in }
            spy.fail(with: anyError)
            scheduler.advance(by: .milliseconds(999))  // nothing yet
            scheduler.advance(by: .milliseconds(1))  // the second attempt starts
            // Sample: end
            XCTAssertEqual(spy.loadCount, 2)
        }
    }

    // Sample: begin
    func test_keyedCacheContract() {
        KeyedCacheContract(keys: ("a", "b"), sampleValues: (1, 2)) { expiry, now in
            MemoryCache<String, Int>(expiry: expiry, now: now)
        }.verify()
    }
    // Sample: end

    @MainActor
    func test_friendScreen() {
        let screen = FriendScreen(store: Store(levels: [], fetch: LoaderFamily { (id: String) in answering(id) }))
        screen.appeared()
        XCTAssertEqual(screen.model.value, "u1")
    }
}
