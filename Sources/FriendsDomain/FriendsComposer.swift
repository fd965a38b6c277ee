import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The composition root of the friends feature: one ``Store`` holds the friends list, and everything reads it,
/// writes it and observes it:
///
/// 1. Friends are read from memory first; if that fails, from the database; if that fails, from the network API.
/// 2. A database hit is kept in memory; a network load is kept in memory and in the database.
/// 3. Live updates, deletes (optimistic or not) and a logout's wipe change the store, which writes memory at once.
///    The database gets what the network brought, a confirmed delete and a wipe at once (before they are reported),
///    and bursts of live updates debounced; ``flush(completion:)`` saves a burst now (call it when the app goes to
///    the background), and a logout cancels it. A deleted friend stays deleted everywhere, and the caches always
///    hold what is shown.
/// 4. Cached data older than `maxAge` counts as missing.
/// 5. With a `changeJournalURL`, processes over one database (an app and its widget) show each other's changes: a
///    delete confirmed or a logout in one reaches the other's ``friendsStream()`` in about a tenth of a second.
///
/// ```swift
/// let composer = FriendsComposer(configuration: .init(
///     baseURL: URL(string: "https://api.example.com")!,
///     databaseURL: applicationSupport.appendingPathComponent("friends.sqlite")))
/// composer.friendsLoader.load { result in render(result) }       // one list, on the main queue
/// composer.friend(id: "u1").load { result in show(result) }      // one friend, from the list or the API
/// let subscription = composer.friendsStream().sink { _ in } receiveValue: { list in render(list) }  // then every change
/// ```
public struct FriendsComposer: Sendable {
    /// What a rename does when the server renamed the same friend meanwhile (see
    /// ``Configuration/resolveRenameConflict``).
    public typealias RenameConflictResolver =
        @Sendable (MutationConflict<[Friend], FriendRename>) -> ConflictResolution<FriendRename>

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
        /// The largest response body accepted, in bytes (64 MiB by default): a larger one fails with
        /// ``FriendsAPIError/responseTooLarge(limit:)`` as soon as the limit is passed, holding no more in memory.
        public var maxResponseBytes: Int
        /// How long the database waits for a burst of live updates to calm down before saving (what the network
        /// brought and confirmed deletes are saved at once).
        public var saveDebounce: Duration
        /// Whether the network can be reached: offline, reads answer from the caches without a request, and deletes
        /// wait in ``FriendsComposer/pendingDeletes``. `nil`: always try.
        public var connectivity: (any ConnectivityMonitor)?
        /// When the app comes to the foreground: the shown list is fetched anew then if it is older than `maxAge`
        /// (and when the network comes back). `nil`: no foreground revalidation.
        public var lifecycle: (any AppLifecycle)?
        /// Where deletes wait for the server, across launches (one file each). By default a folder beside the
        /// database, named after it with `-pending-deletes`.
        public var pendingDeletesDirectory: URL
        /// Where friends added on this device wait for the server, across launches (one file each). By default a
        /// folder beside the database, named after it with `-pending-additions`.
        public var pendingAdditionsDirectory: URL
        /// How many friends a page of ``FriendsComposer/friendPages`` holds.
        public var pageSize: Int
        /// Where the processes over `databaseURL` (an app and its widget, in their app group) record what each
        /// saves, deletes or wipes there, so that each shows what the others changed (see `ProcessSharing`);
        /// `nil` (the default) when this process is the only one using the database.
        public var changeJournalURL: URL?
        /// Where renames wait for the server, across launches (one file each). By default a folder beside the
        /// database, named after it with `-pending-renames`.
        public var pendingRenamesDirectory: URL
        /// What a rename does when the server renamed the same friend meanwhile (it answers with its copy): by
        /// default `.rebase`, this device's name made again over the server's copy and sent; `.takeServerCopy` keeps
        /// the server's; `.ask` waits for ``FriendsComposer/pendingRenames``'s `resolveConflict(_:with:)`.
        public var resolveRenameConflict: RenameConflictResolver

        /// Creates a configuration; the defaults suit a phone app.
        public init(
            baseURL: URL,
            databaseURL: URL,
            maxAge: Duration? = .seconds(300),
            retry: RetryPolicy = .exponential(initial: .milliseconds(200), maxDelay: .seconds(2), maxAttempts: 3),
            timeout: Duration = .seconds(10),
            saveDebounce: Duration = .milliseconds(500),
            maxResponseBytes: Int = URLSessionHTTPClient.defaultMaxResponseBytes,
            connectivity: (any ConnectivityMonitor)? = nil,
            lifecycle: (any AppLifecycle)? = nil,
            pendingDeletesDirectory: URL? = nil,
            pageSize: Int = 20,
            changeJournalURL: URL? = nil,
            pendingAdditionsDirectory: URL? = nil,
            pendingRenamesDirectory: URL? = nil,
            resolveRenameConflict: @escaping RenameConflictResolver = { _ in .rebase }
        ) {
            self.pendingRenamesDirectory =
                pendingRenamesDirectory
                ?? databaseURL.deletingLastPathComponent().appendingPathComponent(
                    databaseURL.deletingPathExtension().lastPathComponent + "-pending-renames")
            self.resolveRenameConflict = resolveRenameConflict
            self.changeJournalURL = changeJournalURL
            self.pendingAdditionsDirectory =
                pendingAdditionsDirectory
                ?? databaseURL.deletingLastPathComponent().appendingPathComponent(
                    databaseURL.deletingPathExtension().lastPathComponent + "-pending-additions")
            self.connectivity = connectivity
            self.lifecycle = lifecycle
            self.pendingDeletesDirectory =
                pendingDeletesDirectory
                ?? databaseURL.deletingLastPathComponent().appendingPathComponent(
                    databaseURL.deletingPathExtension().lastPathComponent + "-pending-deletes")
            self.pageSize = pageSize
            self.maxResponseBytes = maxResponseBytes
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
        /// A store that could not be read at all (a corrupt or truncated database) was deleted and created anew, or
        /// a write found the database file deleted or replaced (``SQLiteFriendsStore/FileChanged``) and went to
        /// what is at its path now.
        case reset(Source, reason: any Error)
        /// A step of a traced load (``FriendsComposer/friend(id:)``): each load has its own identity and timeline.
        case traced(LoadEvent)
    }

    /// The in-memory store (the first level of ``store``).
    public let memoryStore: any FriendsStore
    /// The database store (the second level of ``store``).
    public let databaseStore: any FriendsStore
    /// Deletes friends on the server.
    public let deleter: RemoteFriendsDeleter?
    /// The one source of truth: the friends list under ``FriendsKey/all``, with memory and the database as its
    /// levels and the API as its fetch. Every change goes through it.
    public let store: Store<FriendsKey, [Friend]>
    /// Requirements 1, 2 and 4, delivered on the main queue: the list as ``store`` shows it, read from memory, else
    /// the database, else the network.
    public let friendsLoader: AnyLoader<[Friend]>
    /// The network, kept in both caches, falling back to what is cached when the network fails: what a
    /// pull-to-refresh wants. Delivered on the main queue.
    public let refreshLoader: AnyLoader<[Friend]>

    /// Deletes waiting for the server, kept on disk across launches and sent in order when the network allows
    /// (``deleteFriend(id:completion:)`` adds them); `nil` when the composition has no deleter or no storage for them.
    public let pendingDeletes: MutationQueue<FriendsKey, [Friend], Friend.ID>?
    /// Friends added on this device and their removals, waiting for the server, kept on disk across launches
    /// (``addFriend(named:completion:)`` adds them): each added friend shows at once under a temporary id, which the
    /// server's id replaces once it accepts it. `nil` when the composition has no creator or no storage for them.
    public let pendingAdditions: MutationQueue<FriendsKey, [Friend], NewFriendChange>?
    /// Renames waiting for the server, kept on disk across launches (``renameFriend(_:to:completion:)`` adds them).
    /// A rename the server refuses because the friend changed there meanwhile is a conflict, resolved as the
    /// configuration says (by default this device's name, made again over the server's copy). `nil` when the
    /// composition has no renamer or no storage for them.
    public let pendingRenames: MutationQueue<FriendsKey, [Friend], FriendRename>?
    /// The friends list a page at a time (`GET /friends?page=N`), for an endless list: `nil` when the composition has
    /// no page source.
    public let friendPages: PagedStore<FriendsKey, Friend, Int>?
    /// Every friend the composition shows, one copy each: a friend changed in the list (a live update, a refresh)
    /// shows in the page that holds it too, and the other way round; the copy with the later `updatedAt` wins.
    public let friends: SharedEntities<Friend>
    /// How the friends list is read: cache first, counting only a list younger than the configured maximum age.
    /// ``FriendsRepository/init(composer:scheduler:)`` and ``FriendsScreenModel`` read with it, as
    /// ``friendsLoader`` does.
    public let listPolicy: ReadPolicy
    private let remoteFriend: LoaderFamily<Friend.ID, Friend>?
    private let updates: (any FriendsUpdatesSource)?
    private let memoryLevel: ReportingCache
    private let databaseLevel: ReportingCache
    private let onEvent: @Sendable (Event) -> Void
    private let revalidation: StreamSubscription?

    /// Builds the production composition: an in-memory store, an SQLite store at `databaseURL`, the API over
    /// `session`, and live updates over server-sent events.
    public init(
        configuration: Configuration,
        session: URLSession = .shared,
        scheduler: some Scheduler = .global(),
        currentDate: @escaping @Sendable () -> Date = Date.init,
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        let client = URLSessionHTTPClient(session: session, maxResponseBytes: configuration.maxResponseBytes)
        let (baseURL, timeout, retry) = (configuration.baseURL, configuration.timeout, configuration.retry)
        let pageSize = configuration.pageSize
        self.init(
            memoryStore: InMemoryFriendsStore(),
            databaseStore: SQLiteFriendsStore(
                fileURL: configuration.databaseURL, onFileChanged: { onEvent(.reset(.database, reason: $0)) }),
            remote: RemoteFriendsLoader(baseURL: baseURL, client: client)
                .timeout(after: timeout, scheduler: scheduler)
                .retry(retry.onlyForTransientErrors, scheduler: scheduler)
                .eraseToAnyLoader(),
            remoteFriend: LoaderFamily { id in
                RemoteFriendLoader(id: id, baseURL: baseURL, client: client)
                    .timeout(after: timeout, scheduler: scheduler)
                    .retry(retry.onlyForTransientErrors, scheduler: scheduler)
            },
            updates: ServerSentEventsFriendsUpdates(
                baseURL: configuration.baseURL, configuration: session.configuration, scheduler: scheduler),
            deleter: RemoteFriendsDeleter(baseURL: configuration.baseURL, client: client),
            creator: RemoteFriendsCreator(baseURL: configuration.baseURL, client: client),
            renamer: RemoteFriendsRenamer(baseURL: configuration.baseURL, client: client),
            pages: LoaderFamily { page in
                RemoteFriendsPageLoader(page: page, perPage: pageSize, baseURL: baseURL, client: client)
                    .timeout(after: timeout, scheduler: scheduler)
                    .retry(retry.onlyForTransientErrors, scheduler: scheduler)
            },
            pendingDeletes: FileMutationStorage(directory: configuration.pendingDeletesDirectory),
            pendingAdditions: FileMutationStorage(directory: configuration.pendingAdditionsDirectory),
            pendingRenames: FileMutationStorage(directory: configuration.pendingRenamesDirectory),
            resolveRenameConflict: configuration.resolveRenameConflict,
            sharing: configuration.changeJournalURL.flatMap { journal in
                do {
                    return try .journal(at: journal, sharedLevel: Source.database.rawValue)
                } catch {
                    onEvent(.failed(.database, error))  // the composition works alone: told, not stopped
                    return nil
                }
            },
            connectivity: configuration.connectivity,
            lifecycle: configuration.lifecycle,
            maxAge: configuration.maxAge,
            saveDebounce: configuration.saveDebounce,
            scheduler: scheduler,
            currentDate: currentDate,
            onEvent: onEvent)
    }

    /// Builds the composition from its parts: how tests and other transports plug in. Without `remoteFriend`,
    /// ``friend(id:)`` finds friends in the list only; without `pages` there are no ``friendPages``; without
    /// `pendingDeletes` (or a `deleter`), deletes are not kept across launches; without `pendingAdditions` (or a
    /// `creator`), friends cannot be added; with `sharing` (its shared level named `"database"`), the store keeps in
    /// step with the other processes over the database.
    public init(
        memoryStore: any FriendsStore,
        databaseStore: any FriendsStore,
        remote: AnyLoader<[Friend]>,
        remoteFriend: LoaderFamily<Friend.ID, Friend>? = nil,
        updates: (any FriendsUpdatesSource)? = nil,
        deleter: RemoteFriendsDeleter? = nil,
        creator: RemoteFriendsCreator? = nil,
        renamer: RemoteFriendsRenamer? = nil,
        pages: LoaderFamily<Int, Page<Friend, Int>>? = nil,
        pendingDeletes: (any MutationStorage<Friend.ID>)? = nil,
        pendingAdditions: (any MutationStorage<NewFriendChange>)? = nil,
        pendingRenames: (any MutationStorage<FriendRename>)? = nil,
        resolveRenameConflict: @escaping RenameConflictResolver = { _ in .rebase },
        sharing: ProcessSharing<FriendsKey>? = nil,
        connectivity: (any ConnectivityMonitor)? = nil,
        lifecycle: (any AppLifecycle)? = nil,
        maxAge: Duration? = nil,
        saveDebounce: Duration = .milliseconds(500),
        scheduler: some Scheduler = .global(),
        currentDate: @escaping @Sendable () -> Date = Date.init,
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.memoryStore = memoryStore
        self.databaseStore = databaseStore
        self.deleter = deleter
        self.remoteFriend = remoteFriend.map { family in
            LoaderFamily { id in
                family[id].handleEvents(
                    onStart: { onEvent(.started(.network)) },
                    onValue: { _ in onEvent(.loaded(.network, count: 1)) },
                    onFailure: { onEvent(.failed(.network, $0)) })
            }
            .coalesced()
        }
        self.updates = updates
        self.onEvent = onEvent
        let expiry: CacheExpiry<[Friend]> = maxAge.map { .maxAge($0) } ?? .never
        let memoryLevel = ReportingCache(
            FriendsCache(store: memoryStore, expiry: expiry, now: currentDate), as: .memory, onEvent)
        self.memoryLevel = memoryLevel
        databaseLevel = ReportingCache(
            FriendsCache(
                store: databaseStore, expiry: expiry, now: currentDate,
                onReset: { onEvent(.reset(.database, reason: $0)) }),
            as: .database, onEvent)
        let network = remote.handleEvents(
            onStart: { onEvent(.started(.network)) },
            onValue: { onEvent(.loaded(.network, count: $0.count)) },
            onFailure: { onEvent(.failed(.network, $0)) })
        let friends = SharedEntities<Friend>(isNewer: { $0.updatedAt > $1.updatedAt })
        self.friends = friends
        let store = Store(
            levels: [
                .cache(memoryLevel, name: Source.memory.rawValue),
                .cache(
                    databaseLevel, name: Source.database.rawValue, debouncingWritesFor: saveDebounce,
                    scheduler: scheduler),
            ],
            fetch: LoaderFamily { (_: FriendsKey) in network },
            keptValues: 1,  // one key, the list: it stays in the store between reads
            maxAge: maxAge,
            network: connectivity.map { .answersFromCache($0) } ?? .always,
            now: currentDate,
            sharing: sharing,
            entities: friends.held(in: .elements))
        var triggers: [RevalidationTrigger] = []
        if let lifecycle { triggers.append(.foreground(lifecycle)) }
        if let connectivity { triggers.append(.reconnect(connectivity)) }
        revalidation =
            triggers.isEmpty ? nil : store.revalidate(on: RevalidationTrigger(.merge(triggers.map(\.events))))
        friendPages = pages.map { pages in
            PagedStore(
                levels: [.cache(MemoryCache<FriendsKey, PagedList<Friend, Int>>(), name: Source.memory.rawValue)],
                maxAge: maxAge, network: connectivity.map { .answersFromCache($0) } ?? .always, now: currentDate,
                entities: friends.held(in: .items())
            ) { (_: FriendsKey, page: Int?) in pages[page ?? 1] }
        }
        self.pendingDeletes = Self.pendingDeletes(
            of: store, storage: pendingDeletes, deleter: deleter, connectivity: connectivity, scheduler: scheduler,
            onEvent: onEvent)
        self.pendingAdditions = Self.pendingAdditions(
            of: store, storage: pendingAdditions, creator: creator, deleter: deleter, connectivity: connectivity,
            scheduler: scheduler, onEvent: onEvent)
        self.pendingRenames = Self.pendingRenames(
            of: store, storage: pendingRenames, renamer: renamer, connectivity: connectivity, scheduler: scheduler,
            resolve: resolveRenameConflict, onEvent: onEvent)
        let listPolicy: ReadPolicy = maxAge.map { .cacheFirst(maxAge: $0) } ?? .cacheFirst
        self.store = store
        self.listPolicy = listPolicy
        friendsLoader = store.read(.all, policy: listPolicy).tryMap(Self.friends).dispatchOnMainQueue()
            .eraseToAnyLoader()
        refreshLoader = store.freshValue(of: .all)
            .fallback(to: store.read(.all, policy: .cacheOnly))
            .tryMap(Self.friends)
            .dispatchOnMainQueue()
            .eraseToAnyLoader()
    }

    /// The friend with `id`: from the friends list when it holds them (read as ``friendsLoader`` reads it, without
    /// going to the network for the whole list), else from the API's `GET /friends/{id}`. A friend the API returns
    /// is merged into the list when there is one, so that the list and the friend never disagree. Fails with
    /// ``FriendsAPIError/notFound`` when neither has the friend (`CacheMiss.absent` when the composition has no
    /// `remoteFriend`). Delivered on the main queue. Each load is traced:
    /// ``Event/traced(_:)`` tells its steps ("list", then "network") with their durations.
    public func friend(id: Friend.ID) -> AnyLoader<Friend> {
        let (store, remoteFriend, onEvent) = (store, remoteFriend, onEvent)
        let fromList = store.read(.all, policy: .cacheOnly).tryMap { response in
            guard let friend = response.value?.first(where: { $0.id == id }) else { throw CacheMiss.absent }
            return friend
        }
        let fromAPI = remoteFriend.map { family in
            family[id].handleEvents(onValue: { friend in
                store.update(.all) { list in list?.applying(.upsert(friend)) }
            })
        }
        return TracedLoader("friend \(id)", observer: { onEvent(.traced($0)) }) { trace in
            guard let fromAPI else { return fromList.step("list", of: trace).eraseToAnyLoader() }
            return fromList.step("list", of: trace).fallback(to: fromAPI.step("network", of: trace)).eraseToAnyLoader()
        }
        .dispatchOnMainQueue()
        .eraseToAnyLoader()
    }

    /// Requirements 1 to 4 as a stream: the list, then the list after every change (a live update, a delete, a
    /// refresh, a wipe: an empty list), on the main queue. Live updates that arrive before the list has loaded are
    /// applied to it once it has. The stream fails if the first read finds nothing (the network failed and nothing
    /// is cached) or when the updates source gives up.
    public func friendsStream() -> EventStream<[Friend], any Error> {
        let (store, listPolicy, updates, onEvent) = (store, listPolicy, updates, onEvent)
        let list = store.stream(for: .all, policy: listPolicy)
        guard let updates else { return list.map { $0.value ?? [] }.receive(on: .main) }
        return EventStream.deferred {
            let live = LiveUpdates(store: store)
            let applied = updates.updates()
                .handleEvents(receiveOutput: { update in
                    onEvent(.updateApplied(update))
                    live.receive(update)
                })
                .compactMap { _ -> [Friend]? in nil }
            return
                list
                .handleEvents(receiveOutput: { response in
                    if response.value != nil { live.listArrived() }
                })
                .map { $0.value ?? [] }
                .merge(with: applied)
        }
        .receive(on: .main)
    }

    /// Deletes the friend with `id`: gone from the list at once. With ``pendingDeletes``, the delete is kept on disk
    /// first and sent when the network allows, across launches; a transient failure keeps it waiting (it is sent
    /// again later), and `completion` runs once it is settled. Without, it is sent now. `completion` receives a
    /// success once the server agreed and the database holds the list without the friend; the server's refusal
    /// (the friend shows again; other deletes stay); or ``StoreError/cleared`` when a logout came first.
    public func deleteFriend(
        id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) {
        let removing: @Sendable ([Friend]?) -> [Friend]? = { list in list?.filter { $0.id != id } }
        if NewFriendChange.isTemporary(id), let pendingAdditions {
            // Added on this device: removed after its creation, under the server's id once it has one.
            do {
                try pendingAdditions.enqueue(.delete(id), completion: completion)
            } catch {
                completion(.failure(error))
            }
            return
        }
        if let pendingDeletes {
            do { try pendingDeletes.enqueue(id, completion: completion) } catch { completion(.failure(error)) }
            return
        }
        let deleter = deleter
        let commit = AnyLoader<Void> { completion in
            guard let deleter else {
                completion(.failure(FriendsRepository.DeletionUnavailable()))
                return AnyCancellationToken {}
            }
            return deleter.delete(id: id, completion: completion)
        }
        store.mutate(.all, removing, commit: commit, completion: completion)
    }

    /// Adds a friend named `name`: shown at once in the list under a temporary id (returned), kept on disk, and
    /// created on the server when the network allows, across launches; the server's id then replaces the temporary
    /// one in the list, in the database and in the changes still waiting (a removal made meanwhile). `completion`
    /// receives a success once the server created the friend and the database holds it; the server's refusal (the
    /// friend disappears); or ``StoreError/cleared`` when a logout came first.
    /// - Throws: ``FriendsComposer/AdditionUnavailable`` without ``pendingAdditions``; the storage's error when the
    ///   addition could not be saved (nothing is shown).
    @discardableResult
    public func addFriend(
        named name: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) throws -> Friend.ID {
        guard let pendingAdditions else { throw AdditionUnavailable() }
        let id = NewFriendChange.temporaryIDPrefix + UUID().uuidString
        let friend = Friend(id: id, name: name, status: .offline, updatedAt: Date())
        try pendingAdditions.enqueue(.add(friend), completion: completion)
        return id
    }

    /// Renames `friend` (as the list shows it) to `name`: renamed in the list at once, kept on disk, and sent when the
    /// network allows, across launches. When the server renamed the same friend meanwhile it answers with its copy,
    /// which the list shows at once, and the configuration's `resolveRenameConflict` decides: by default this
    /// device's name wins, sent again over the server's copy. `completion` receives a success once the server renamed
    /// the friend and the database holds it; `MutationConflictError.replacedByServerCopy` when the server's name was
    /// kept; the server's refusal; or ``StoreError/cleared`` when a logout came first.
    /// - Throws: ``FriendsComposer/RenameUnavailable`` without ``pendingRenames``; the storage's error when the rename
    ///   could not be saved (nothing is shown).
    public func renameFriend(
        _ friend: Friend, to name: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) throws {
        guard let pendingRenames else { throw RenameUnavailable() }
        try pendingRenames.enqueue(
            FriendRename(friendID: friend.id, name: name, basedOn: friend.updatedAt), completion: completion)
    }

    /// Why ``renameFriend(_:to:completion:)`` could not rename a friend: the composition has no renamer or no storage
    /// for renames.
    public struct RenameUnavailable: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String {
            "Friends cannot be renamed: this composition has no way to rename them on the server."
        }

        public var errorDescription: String? { description }
    }

    /// Why ``addFriend(named:completion:)`` could not add a friend: the composition has no creator or no storage for
    /// additions.
    public struct AdditionUnavailable: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String {
            "Friends cannot be added: this composition has no way to create them on the server."
        }

        public var errorDescription: String? { description }
    }

    /// The queue of additions over `store`, kept in `storage`: `nil` without a creator, a deleter or a storage, or
    /// when the storage cannot be read (reported as a failed database read).
    private static func pendingAdditions(
        of store: Store<FriendsKey, [Friend]>, storage: (any MutationStorage<NewFriendChange>)?,
        creator: RemoteFriendsCreator?, deleter: RemoteFriendsDeleter?, connectivity: (any ConnectivityMonitor)?,
        scheduler: some Scheduler, onEvent: @escaping @Sendable (Event) -> Void
    ) -> MutationQueue<FriendsKey, [Friend], NewFriendChange>? {
        guard let storage, let creator, let deleter else { return nil }
        do {
            return try MutationQueue(
                store: store, storage: storage, connectivity: connectivity, scheduler: scheduler,
                key: { _ in .all },
                change: { change, list in change.applied(to: list) },
                send: { change, idempotencyKey in
                    AnyLoader<Void> { completion in
                        deleter.delete(id: change.friendID, idempotencyKey: idempotencyKey) { result in
                            // Gone already (a delete whose answer was lost, sent again): what was asked holds.
                            if case .failure(FriendsAPIError.notFound) = result { return completion(.success(())) }
                            completion(result)
                        }
                    }
                },
                isRefused: { !FriendsAPIError.isTransient($0) },
                creation: OfflineCreation(
                    temporaryID: { change in
                        if case .add(let friend) = change { friend.id } else { nil }
                    },
                    replacingIDs: { change, serverID in change.replacingIDs(serverID) },
                    send: { change, idempotencyKey in
                        AnyLoader<String> { completion in
                            guard case .add(let friend) = change else {
                                preconditionFailure("Only an addition is sent as a creation")
                            }
                            return creator.create(named: friend.name, idempotencyKey: idempotencyKey) { result in
                                completion(result.map(\.id))
                            }
                        }
                    }),
                replacingIDsInValue: { list, serverID in NewFriendChange.replacingIDs(in: list, serverID) },
                onStorageFailure: { onEvent(.saveFailed(.database, $0)) })
        } catch {
            onEvent(.failed(.database, error))
            return nil
        }
    }

    /// The queue of renames over `store`, kept in `storage`, its conflicts resolved by `resolve`: `nil` without a
    /// renamer or a storage, or when the storage cannot be read (reported as a failed database read).
    private static func pendingRenames(
        of store: Store<FriendsKey, [Friend]>, storage: (any MutationStorage<FriendRename>)?,
        renamer: RemoteFriendsRenamer?, connectivity: (any ConnectivityMonitor)?, scheduler: some Scheduler,
        resolve: @escaping RenameConflictResolver, onEvent: @escaping @Sendable (Event) -> Void
    ) -> MutationQueue<FriendsKey, [Friend], FriendRename>? {
        guard let storage, let renamer else { return nil }
        do {
            return try MutationQueue(
                store: store, storage: storage, connectivity: connectivity, scheduler: scheduler,
                key: { _ in .all },
                change: { rename, list in rename.applied(to: list) },
                send: { rename, idempotencyKey in
                    AnyLoader<Void> { completion in
                        renamer.rename(rename, idempotencyKey: idempotencyKey) { completion($0.map { _ in () }) }
                    }
                },
                isRefused: { !FriendsAPIError.isTransient($0) },
                // The server answers a conflict with its friend: the list it holds is the confirmed one with that
                // friend in place, and a rename sent again names that friend's version.
                conflicts: MutationConflicts(
                    serverCopy: { error, list in (error as? FriendRenameConflict)?.replacing(in: list) },
                    rebasing: { rename, list in rename.rebased(on: list) },
                    resolve: resolve),
                onStorageFailure: { onEvent(.saveFailed(.database, $0)) })
        } catch {
            onEvent(.failed(.database, error))
            return nil
        }
    }

    /// The queue of deletes over `store`, kept in `storage`: `nil` without a deleter or a storage, or when the
    /// storage cannot be read (reported as a failed database read).
    private static func pendingDeletes(
        of store: Store<FriendsKey, [Friend]>, storage: (any MutationStorage<Friend.ID>)?,
        deleter: RemoteFriendsDeleter?, connectivity: (any ConnectivityMonitor)?, scheduler: some Scheduler,
        onEvent: @escaping @Sendable (Event) -> Void
    ) -> MutationQueue<FriendsKey, [Friend], Friend.ID>? {
        guard let storage, let deleter else { return nil }
        do {
            return try MutationQueue(
                store: store, storage: storage, connectivity: connectivity, scheduler: scheduler,
                key: { _ in .all },
                change: { id, list in list?.filter { $0.id != id } },
                send: { id, idempotencyKey in
                    AnyLoader<Void> { completion in
                        deleter.delete(id: id, idempotencyKey: idempotencyKey) { result in
                            // Gone already (a delete whose answer was lost, sent again): what was asked holds.
                            if case .failure(FriendsAPIError.notFound) = result { return completion(.success(())) }
                            completion(result)
                        }
                    }
                },
                isRefused: { !FriendsAPIError.isTransient($0) },
                onStorageFailure: { onEvent(.saveFailed(.database, $0)) })
        } catch {
            onEvent(.failed(.database, error))
            return nil
        }
    }

    /// Saves the live updates waiting for the database's debounce now: call it when the app goes to the background,
    /// so that what the user saw survives the process being ended. `completion` runs once the database has them.
    ///
    /// ```swift
    /// // In the app's "did enter background" hook:
    /// composer.flush()
    /// ```
    public func flush(completion: @escaping @Sendable () -> Void = {}) {
        store.flush(completion: completion)
    }

    /// Deletes expired or unreadable cached data from both stores (call it at launch). An unreadable database is
    /// deleted and created anew, and ``Event/reset(_:reason:)`` reported.
    public func validateCaches(completion: @escaping @Sendable () -> Void = {}) {
        let (memoryLevel, databaseLevel) = (memoryLevel.base, databaseLevel.base)
        // Reading a level deletes what it holds when that has expired or cannot be read.
        databaseLevel.value(for: .all) { _ in
            memoryLevel.value(for: .all) { _ in completion() }
        }
    }

    private static func friends(in response: StoreResponse<[Friend]>) throws -> [Friend] {
        if let error = response.error { throw error }
        return response.value ?? []
    }
}

/// Applies live updates to the store's list in the order they came; those that come before the list is there
/// wait for it, and are applied (still in order, before any later one) once it is.
private final class LiveUpdates: Sendable {
    private enum Phase { case waiting, flushing, live }

    private let store: Store<FriendsKey, [Friend]>
    private let state = Locked<(phase: Phase, waiting: [FriendUpdate])>((.waiting, []))

    init(store: Store<FriendsKey, [Friend]>) {
        self.store = store
    }

    func receive(_ update: FriendUpdate) {
        let isLive = state.withLock { state -> Bool in
            guard state.phase == .live else {
                state.waiting.append(update)
                return false
            }
            return true
        }
        if isLive { store.update(.all) { $0?.applying(update) } }
    }

    func listArrived() {
        let flushes = state.withLock { state -> Bool in
            guard state.phase == .waiting else { return false }
            state.phase = .flushing
            return true
        }
        guard flushes else { return }
        while true {
            let batch = state.withLock { state -> [FriendUpdate] in
                let batch = state.waiting
                state.waiting = []
                if batch.isEmpty { state.phase = .live }
                return batch
            }
            if batch.isEmpty { return }
            store.update(.all) { list in list.map { batch.reduce($0) { $0.applying($1) } } }
        }
    }
}

/// A level that reports what happens to it as composer events.
private struct ReportingCache: KeyedCache {
    let base: FriendsCache
    let source: FriendsComposer.Source
    let onEvent: @Sendable (FriendsComposer.Event) -> Void

    init(
        _ base: FriendsCache, as source: FriendsComposer.Source,
        _ onEvent: @escaping @Sendable (FriendsComposer.Event) -> Void
    ) {
        self.base = base
        self.source = source
        self.onEvent = onEvent
    }

    func value(
        for key: FriendsKey, completion: @escaping @Sendable (Result<CachedValue<[Friend]>, any Error>) -> Void
    ) {
        let (source, onEvent) = (source, onEvent)
        onEvent(.started(source))
        base.value(for: key) { result in
            switch result {
            case .success(let cached): onEvent(.loaded(source, count: cached.value.count))
            case .failure(let error): onEvent(.failed(source, error))
            }
            completion(result)
        }
    }

    func save(
        _ friends: [Friend], for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        base.save(friends, for: key, completion: reportingSave(of: friends, then: completion))
    }

    func save(
        _ friends: [Friend], for key: FriendsKey, savedAt: Date,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        base.save(friends, for: key, savedAt: savedAt, completion: reportingSave(of: friends, then: completion))
    }

    /// `completion`, after reporting how the save of `friends` ended.
    private func reportingSave(
        of friends: [Friend], then completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> @Sendable (Result<Void, any Error>) -> Void {
        let (source, onEvent) = (source, onEvent)
        return { result in
            switch result {
            case .success: onEvent(.saved(source, count: friends.count))
            case .failure(let error): onEvent(.saveFailed(source, error))
            }
            completion(result)
        }
    }

    func removeValue(for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeValue(for: key, completion: completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        base.removeAll(completion: completion)
    }
}

extension RetryPolicy {
    /// This policy, retrying only what ``FriendsAPIError/isTransient(_:)`` accepts (and what the policy accepts).
    var onlyForTransientErrors: RetryPolicy {
        retrying(if: FriendsAPIError.isTransient)
    }
}
