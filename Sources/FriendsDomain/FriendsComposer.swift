import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The composition root of the friends feature: it builds, from a small configuration, this chain:
///
/// 1. Load friends from memory first; if that fails, from the database; if that fails, from the network API.
/// 2. A successful database load is cached in memory.
/// 3. A successful network load is cached in the database and in memory.
/// 4. Live updates are merged in: a changed friend replaces the old one by id, and each updated list is cached in
///    memory at once and in the database, debounced.
/// 5. Cached data older than `maxAge` counts as missing; database saves during a burst of updates are delayed.
///
/// ```swift
/// let composer = FriendsComposer(configuration: .init(
///     baseURL: URL(string: "https://api.example.com")!,
///     databaseURL: applicationSupport.appendingPathComponent("friends.sqlite")))
/// composer.friendsLoader.load { result in ... }          // one list, on the main queue
/// let subscription = composer.friendsStream().sink(...)   // the list, then every update, on the main queue
/// ```
public struct FriendsComposer: Sendable {
    /// The knobs of the composition.
    public struct Configuration: Sendable {
        /// The friends API, for example `https://api.example.com/v1`.
        public var baseURL: URL
        /// The SQLite file of the local database.
        public var databaseURL: URL
        /// How old cached friends may be before they count as missing (`nil`: never too old).
        public var maxAge: Duration?
        /// How the network load is retried. Only transient failures are (connectivity, timeouts, 408, 429, 5xx: see
        /// ``FriendsAPIError/isTransient``), and a server's `Retry-After` is honoured within the policy's maximum delay.
        public var retry: RetryPolicy
        /// How long one network attempt may take.
        public var timeout: Duration
        /// How long the database waits for a burst of updates to calm down before saving.
        public var saveDebounce: Duration

        /// Creates a configuration; the defaults suit a phone app.
        public init(
            baseURL: URL,
            databaseURL: URL,
            maxAge: Duration? = .seconds(300),
            retry: RetryPolicy = .exponential(initial: .milliseconds(200), maxDelay: .seconds(2), maxAttempts: 3),
            timeout: Duration = .seconds(10),
            saveDebounce: Duration = .milliseconds(500)
        ) {
            self.baseURL = baseURL
            self.databaseURL = databaseURL
            self.maxAge = maxAge
            self.retry = retry
            self.timeout = timeout
            self.saveDebounce = saveDebounce
        }
    }

    /// Where a result came from.
    public enum Source: String, Sendable {
        /// The in-memory store.
        case memory
        /// The SQLite database.
        case database
        /// The friends API.
        case network
    }

    /// What happens inside the composition, for logs, metrics and demos.
    public enum Event: Sendable {
        /// A source is asked.
        case started(Source)
        /// A source delivered `count` friends.
        case loaded(Source, count: Int)
        /// A source failed (a miss, an expired cache, a network error).
        case failed(Source, any Error)
        /// A list was saved to a store.
        case saved(Source, count: Int)
        /// A save failed.
        case saveFailed(Source, any Error)
        /// A live update was merged into the list.
        case updateApplied(FriendUpdate)
    }

    /// The in-memory store (the first source).
    public let memoryStore: any FriendsStore
    /// The database store (the second source).
    public let databaseStore: any FriendsStore
    /// Deletes friends on the server.
    public let deleter: RemoteFriendsDeleter?

    private let memory: LocalFriendsLoader
    private let database: LocalFriendsLoader
    private let remote: AnyLoader<[Friend]>
    private let updates: (any FriendsUpdatesSource)?
    private let saveDebounce: Duration
    private let scheduler: any Scheduler
    private let onEvent: @Sendable (Event) -> Void

    /// Builds the production composition: an in-memory store, an SQLite store at `databaseURL`, the API over
    /// `session`, and live updates over server-sent events.
    public init(
        configuration: Configuration,
        session: URLSession = .shared,
        scheduler: some Scheduler = .global(),
        currentDate: @escaping @Sendable () -> Date = Date.init,
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        let client = URLSessionHTTPClient(session: session)
        self.init(
            memoryStore: InMemoryFriendsStore(),
            databaseStore: SQLiteFriendsStore(fileURL: configuration.databaseURL),
            remote: RemoteFriendsLoader(baseURL: configuration.baseURL, client: client)
                .timeout(after: configuration.timeout, scheduler: scheduler)
                .retry(configuration.retry.onlyForTransientErrors, scheduler: scheduler)
                .eraseToAnyLoader(),
            updates: ServerSentEventsFriendsUpdates(
                baseURL: configuration.baseURL, configuration: session.configuration, scheduler: scheduler),
            deleter: RemoteFriendsDeleter(baseURL: configuration.baseURL, client: client),
            maxAge: configuration.maxAge,
            saveDebounce: configuration.saveDebounce,
            scheduler: scheduler,
            currentDate: currentDate,
            onEvent: onEvent)
    }

    /// Builds the composition from its parts: how tests and other transports plug in.
    public init(
        memoryStore: any FriendsStore,
        databaseStore: any FriendsStore,
        remote: AnyLoader<[Friend]>,
        updates: (any FriendsUpdatesSource)? = nil,
        deleter: RemoteFriendsDeleter? = nil,
        maxAge: Duration? = nil,
        saveDebounce: Duration = .milliseconds(500),
        scheduler: some Scheduler = .global(),
        currentDate: @escaping @Sendable () -> Date = Date.init,
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.memoryStore = memoryStore
        self.databaseStore = databaseStore
        self.deleter = deleter
        memory = LocalFriendsLoader(store: memoryStore, maxAge: maxAge, currentDate: currentDate)
        database = LocalFriendsLoader(store: databaseStore, maxAge: maxAge, currentDate: currentDate)
        self.remote = remote
        self.updates = updates
        self.saveDebounce = saveDebounce
        self.scheduler = scheduler
        self.onEvent = onEvent
    }

    /// Requirements 1 to 3 and the cache policy, delivered on the main queue.
    public var friendsLoader: AnyLoader<[Friend]> {
        cachedChain.dispatchOnMainQueue().eraseToAnyLoader()
    }

    /// The network, cached to both stores, falling back to the database and memory when the network fails:
    /// what a pull-to-refresh wants (it skips the memory cache). Delivered on the main queue.
    public var refreshLoader: AnyLoader<[Friend]> {
        networkCachedToBoth
            .fallback(to: observed(database, .database).fallback(to: observed(memory, .memory)))
            .dispatchOnMainQueue()
            .eraseToAnyLoader()
    }

    /// Requirements 1 to 5: the loaded list, then a new list for every live update, each cached in memory at once
    /// and in the database debounced; delivered on the main queue. The stream fails if the load fails; it ends
    /// when the updates source gives up.
    public func friendsStream() -> EventStream<[Friend], any Error> {
        let loaded = cachedChain.asStream()
        guard let updates else { return loaded.receive(on: .main) }
        let memory = self.memory
        let database = self.database
        let onEvent = self.onEvent
        let saveDebounce = self.saveDebounce
        let scheduler = self.scheduler
        return
            loaded
            .flatMap { list in
                EventStream<[Friend], any Error>.just(list)
                    .merge(
                        with: updates.updates()
                            .handleEvents(receiveOutput: { onEvent(.updateApplied($0)) })
                            .scan(list) { friends, update in friends.applying(update) }
                            .caching(to: Self.reporting(memory, as: .memory, onEvent))
                            .caching(
                                to: Self.reporting(database, as: .database, onEvent), debounce: saveDebounce,
                                scheduler: scheduler))
            }
            .receive(on: .main)
    }

    /// Deletes expired or unreadable cached data from both stores (call it at launch).
    public func validateCaches(completion: @escaping @Sendable () -> Void = {}) {
        let database = self.database
        memory.validateCache { _ in database.validateCache { _ in completion() } }
    }

    // MARK: - The chain

    private var cachedChain: some Loader<[Friend]> {
        observed(memory, .memory)
            .fallback(to: observed(database, .database).caching(to: Self.reporting(memory, as: .memory, onEvent)))
            .fallback(to: networkCachedToBoth)
    }

    private var networkCachedToBoth: some Loader<[Friend]> {
        observed(remote, .network)
            .caching(to: Self.reporting(database, as: .database, onEvent))
            .caching(to: Self.reporting(memory, as: .memory, onEvent))
    }

    private func observed<L: Loader<[Friend]>>(_ loader: L, _ source: Source) -> HandleEventsLoader<L> {
        let onEvent = self.onEvent
        return loader.handleEvents(
            onStart: { onEvent(.started(source)) },
            onValue: { onEvent(.loaded(source, count: $0.count)) },
            onFailure: { onEvent(.failed(source, $0)) })
    }

    /// A cache that reports each save's outcome.
    private static func reporting(
        _ cache: LocalFriendsLoader, as source: Source, _ onEvent: @escaping @Sendable (Event) -> Void
    ) -> AnyCache<[Friend]> {
        AnyCache { friends, completion in
            cache.save(friends) { result in
                switch result {
                case .success: onEvent(.saved(source, count: friends.count))
                case .failure(let error): onEvent(.saveFailed(source, error))
                }
                completion(result)
            }
        }
    }
}

extension RetryPolicy {
    /// This policy, retrying only what ``FriendsAPIError/isTransient(_:)`` accepts (and what the policy accepts).
    var onlyForTransientErrors: RetryPolicy {
        let accepts = shouldRetry
        return retrying { accepts($0) && FriendsAPIError.isTransient($0) }
    }
}
