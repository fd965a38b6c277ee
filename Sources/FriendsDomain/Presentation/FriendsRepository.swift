import Foundation
import Loading

/// Deletes a friend on the server; ``RemoteFriendsDeleter`` is the real one.
public protocol FriendDeleting: Sendable {
    /// Deletes the friend with `id` and reports the outcome.
    @discardableResult
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
}

extension RemoteFriendsDeleter: FriendDeleting {}

/// The friends list as a screen consumes it: a loading state shared by every observer, over the composition's
/// ``Store``; deletes that can be optimistic and undo only themselves when refused; and a wipe for logout.
///
/// ```swift
/// let repository = FriendsRepository(composer: composer)
/// let subscription = repository.state.sink { render($0) }
/// let toasts = repository.events.sink { event in showToast(event) }
/// repository.load()
/// repository.remove(id: "u1", optimistic: true)
/// ```
/// Every change goes through the store, which writes the memory and database caches: they always end up holding
/// what is shown, and a confirmed delete stays deleted whatever loads or live updates come after it.
public final class FriendsRepository: Sendable {
    /// A deletion was asked of a repository whose composition has no deleter: nothing was sent.
    public struct DeletionUnavailable: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String { "Deleting friends is not available: the composition has no deleter." }

        public var errorDescription: String? { description }
    }

    /// Something a screen should tell the user about, beside the state.
    public enum Event: Sendable {
        /// Deleting the friend failed; it is shown again.
        case deletionFailed(id: Friend.ID, error: any Error)
    }

    private let repository: ResourceRepository<[Friend]>
    private let store: Store<FriendsKey, [Friend]>
    private let deleter: any FriendDeleting
    private let eventSubject = StreamSubject<Event, Never>()
    private let eventDelivery: EventStream<Event, Never>

    /// Creates a repository showing the friends list of `store`, read with `policy`, deleting with `deleter`.
    public init(
        store: Store<FriendsKey, [Friend]>,
        deleter: any FriendDeleting,
        policy: ReadPolicy = .cacheFirst,
        scheduler: some Scheduler = .main
    ) {
        repository = ResourceRepository(store: store, key: .all, policy: policy, scheduler: scheduler)
        self.store = store
        self.deleter = deleter
        eventDelivery = eventSubject.stream.receive(on: scheduler)
    }

    /// Creates a repository from its parts: the friends are read from `memoryStore`, then `databaseStore`, then
    /// `refreshLoader`, and `refresh()` reaches `refreshLoader`. `loader` is not called: in a composition it chained
    /// those same sources, which the repository's store now reads itself.
    @available(
        *, deprecated,
        message: "Use init(composer:scheduler:), or init(store:deleter:policy:scheduler:) with a Store over the stores"
    )
    public convenience init(
        loader: AnyLoader<[Friend]>,
        refreshLoader: AnyLoader<[Friend]>,
        memoryStore: any FriendsStore,
        databaseStore: any FriendsStore,
        deleter: any FriendDeleting,
        scheduler: some Scheduler = .main
    ) {
        // `loader` chained the two stores before the network: the store reads them as its levels, then fetches.
        let store = Store(
            levels: [
                .cache(FriendsCache(store: memoryStore), name: "memory"),
                .cache(FriendsCache(store: databaseStore), name: "database"),
            ],
            fetch: LoaderFamily { (_: FriendsKey) in refreshLoader })
        self.init(store: store, deleter: deleter, scheduler: scheduler)
    }

    /// Creates the repository of a composition (whose deleter must exist: the production composer has one).
    public convenience init(composer: FriendsComposer, scheduler: some Scheduler = .main) {
        self.init(
            store: composer.store, deleter: composer.deleter ?? MissingDeleter(), policy: composer.listPolicy,
            scheduler: scheduler)
    }

    /// The loading state: the current one at once, then every change.
    public var state: EventStream<LoadingState<[Friend]>, Never> { repository.state }

    /// The current state, read synchronously.
    public var currentState: LoadingState<[Friend]> { repository.currentState }

    /// Events for the user, such as a failed deletion (a toast).
    public var events: EventStream<Event, Never> { eventDelivery }

    /// Loads the friends (joining a load in flight).
    public func load() { repository.load() }

    /// Fetches the friends from the network anew, even while a load is in flight.
    public func refresh() { repository.refresh() }

    /// Removes a friend.
    ///
    /// Optimistic: the list without the friend is shown at once and the caches follow once the server agrees; if
    /// the server refuses, the friend is shown again (other deletes made meanwhile stay) and
    /// ``Event/deletionFailed(id:error:)`` is sent. Not optimistic: nothing changes until the server agrees; then
    /// the friend is removed and the list fetched anew, the server's truth; on refusal the event, as above.
    /// `completion` runs with the server's answer.
    public func remove(
        id: Friend.ID,
        optimistic: Bool = true,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) {
        let (repository, store, eventSubject, deleter) = (repository, store, eventSubject, deleter)
        let report: @Sendable (Result<Void, any Error>) -> Void = { result in
            if case .failure(let error) = result { eventSubject.send(.deletionFailed(id: id, error: error)) }
            completion(result)
        }
        guard optimistic else {
            deleter.delete(id: id) { result in
                if case .success = result {
                    store.update(.all) { list in list?.filter { $0.id != id } }
                    repository.refresh()
                }
                report(result)
            }
            return
        }
        let commit = AnyLoader<Void> { completion in deleter.delete(id: id, completion: completion) }
        repository.mutate({ list in list?.filter { $0.id != id } }, commit: commit, completion: report)
    }

    /// Forgets everything, as on logout: cancels loads in flight and pending deletes, goes back to idle, and
    /// empties the memory store and the database (a pending debounced save is cancelled, so nothing from before
    /// comes back). `completion` runs once both stores are empty.
    public func wipe(completion: @escaping @Sendable () -> Void = {}) {
        repository.wipe()
        store.clear(completion: completion)
    }
}

/// The deleter of a composition built without one: every deletion fails.
private struct MissingDeleter: FriendDeleting {
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
    {
        completion(.failure(FriendsRepository.DeletionUnavailable()))
        return AnyCancellationToken()
    }
}
