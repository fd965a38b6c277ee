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

/// The friends list as a screen consumes it: a loading state shared by every observer, deletes that can
/// be optimistic and roll back, and a wipe for logout.
///
/// ```swift
/// let repository = FriendsRepository(composer: composer)
/// let subscription = repository.state.sink { render($0) }
/// let toasts = repository.events.sink { event in showToast(event) }
/// repository.load()
/// repository.remove(id: "u1", optimistic: true)
/// ```
/// The memory and database caches always end up matching what is published.
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
        /// Deleting the friend failed; the list was restored.
        case deletionFailed(id: Friend.ID, error: any Error)
    }

    private let repository: ResourceRepository<[Friend]>
    private let memoryStore: any FriendsStore
    private let databaseStore: any FriendsStore
    private let deleter: any FriendDeleting
    private let eventSubject = StreamSubject<Event, Never>()
    private let eventDelivery: EventStream<Event, Never>

    /// Creates a repository from its parts.
    public init(
        loader: AnyLoader<[Friend]>,
        refreshLoader: AnyLoader<[Friend]>,
        memoryStore: any FriendsStore,
        databaseStore: any FriendsStore,
        deleter: any FriendDeleting,
        scheduler: some Scheduler = .main
    ) {
        repository = ResourceRepository(loader: loader, refreshLoader: refreshLoader, scheduler: scheduler)
        self.memoryStore = memoryStore
        self.databaseStore = databaseStore
        self.deleter = deleter
        eventDelivery = eventSubject.stream.receive(on: scheduler)
    }

    /// Creates the repository of a composition (whose deleter must exist: the production composer has one).
    public convenience init(composer: FriendsComposer, scheduler: some Scheduler = .main) {
        self.init(
            loader: composer.friendsLoader,
            refreshLoader: composer.refreshLoader,
            memoryStore: composer.memoryStore,
            databaseStore: composer.databaseStore,
            deleter: composer.deleter ?? MissingDeleter(),
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

    /// Loads from the network, skipping the memory cache (joining a load in flight).
    public func refresh() { repository.refresh() }

    /// Removes a friend.
    ///
    /// Optimistic: the list without the friend is published at once and the caches follow once the server agrees;
    /// if the server refuses, the previous list is published again and ``Event/deletionFailed(id:error:)`` is sent.
    /// Not optimistic: loading is published (keeping the list), and once the server agrees the list is loaded again
    /// from the network, its truth; on refusal the previous list and the event, as above.
    /// `completion` runs when all of that is done.
    public func remove(
        id: Friend.ID,
        optimistic: Bool = true,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) {
        let previous = repository.currentState.value ?? []
        let remaining = previous.filter { $0.id != id }
        if optimistic {
            repository.publish(remaining)
        } else {
            repository.publish(state: .loading(previous: previous))
        }
        let (repository, memoryStore, databaseStore, eventSubject) = (
            repository, memoryStore, databaseStore, eventSubject
        )
        deleter.delete(id: id) { result in
            switch result {
            case .success:
                memoryStore.delete(id: id) { _ in
                    databaseStore.delete(id: id) { _ in
                        guard !optimistic else { return completion(.success(())) }
                        repository.publish(state: .loading(previous: remaining))
                        repository.refresh()
                        repository.load { _ in completion(.success(())) }
                    }
                }
            case .failure(let error):
                repository.publish(previous)
                eventSubject.send(.deletionFailed(id: id, error: error))
                completion(.failure(error))
            }
        }
    }

    /// Forgets everything, as on logout: cancels loads in flight, goes back to idle, and empties the memory store
    /// and the database. Nothing loaded before the wipe is published after it.
    public func wipe(completion: @escaping @Sendable () -> Void = {}) {
        repository.wipe()
        let databaseStore = self.databaseStore
        memoryStore.deleteAll { _ in databaseStore.deleteAll { _ in completion() } }
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
