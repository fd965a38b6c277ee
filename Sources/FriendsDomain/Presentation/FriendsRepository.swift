import Foundation
import Loading
import LoadingScreens

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

    private let store: Store<FriendsKey, [Friend]>
    private let policy: ReadPolicy
    private let delivered: EventStream<LoadingState<[Friend]>, Never>
    private let deleter: any FriendDeleting
    private let eventSubject = StreamSubject<Event, Never>()
    private let eventDelivery: EventStream<Event, Never>
    private let deletes = PendingDeletes()
    /// A composition's optimistic delete (through its queue of pending deletes, when it has one).
    private let deleteOptimistically:
        (@Sendable (Friend.ID, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void)?

    /// Creates a repository showing the friends list of `store`, read with `policy`, deleting with `deleter`.
    public convenience init(
        store: Store<FriendsKey, [Friend]>,
        deleter: any FriendDeleting,
        policy: ReadPolicy = .cacheFirst,
        scheduler: some Scheduler = .main
    ) {
        self.init(store: store, deleter: deleter, policy: policy, scheduler: scheduler, deleteOptimistically: nil)
    }

    private init(
        store: Store<FriendsKey, [Friend]>,
        deleter: any FriendDeleting,
        policy: ReadPolicy,
        scheduler: some Scheduler,
        deleteOptimistically: (@Sendable (Friend.ID, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void)?
    ) {
        self.store = store
        self.policy = policy
        delivered = store.states(for: .all).map { $0.loadingState }.receive(on: scheduler)
        self.deleter = deleter
        self.deleteOptimistically = deleteOptimistically
        eventDelivery = eventSubject.stream.receive(on: scheduler)
    }

    /// Creates the repository of a composition (whose deleter must exist: the production composer has one). Its
    /// optimistic deletes go through the composition's ``FriendsComposer/deleteFriend(id:completion:)``: kept on
    /// disk and sent when the network allows.
    public convenience init(composer: FriendsComposer, scheduler: some Scheduler = .main) {
        self.init(
            store: composer.store, deleter: composer.deleter ?? MissingDeleter(), policy: composer.listPolicy,
            scheduler: scheduler, deleteOptimistically: { composer.deleteFriend(id: $0, completion: $1) })
    }

    /// The loading state: the current one at once, then every change (the store's states of the list: loading
    /// whenever the store fetches it, for whoever asked).
    public var state: EventStream<LoadingState<[Friend]>, Never> { delivered }

    /// The current state, read synchronously.
    public var currentState: LoadingState<[Friend]> { store.state(for: .all).loadingState }

    /// Events for the user, such as a failed deletion (a toast).
    public var events: EventStream<Event, Never> { eventDelivery }

    /// Loads the friends (joining a load in flight).
    public func load() { _ = store.read(.all, policy: policy).load { _ in } }

    /// Fetches the friends from the network anew, even while a load is in flight.
    public func refresh() { _ = store.freshValue(of: .all).load { _ in } }

    /// Removes a friend.
    ///
    /// Optimistic: the list without the friend is shown at once and the caches follow once the server agrees; if
    /// the server refuses, the friend is shown again (other deletes made meanwhile stay) and
    /// ``Event/deletionFailed(id:error:)`` is sent. Not optimistic: nothing changes until the server agrees; then
    /// the friend is removed, saved, and the list invalidated (fetched anew, the server's truth, for the screens that
    /// show it); on refusal the event, as above.
    /// `completion` runs with the server's answer, a success once the database holds the list without the friend.
    /// A ``wipe(completion:)`` before the answer cancels the delete: `completion` receives ``StoreError/cleared``,
    /// and no event is sent.
    public func remove(
        id: Friend.ID,
        optimistic: Bool = true,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) {
        let (store, eventSubject, deleter, deletes) = (store, eventSubject, deleter, deletes)
        let report: @Sendable (Result<Void, any Error>) -> Void = { result in
            // A logout's wipe is not a failed deletion: nothing to tell the user.
            if case .failure(let error) = result, (error as? StoreError) != .cleared {
                eventSubject.send(.deletionFailed(id: id, error: error))
            }
            completion(result)
        }
        guard optimistic else {
            let ticket = deletes.add(report)
            let token = deleter.delete(id: id) { result in
                guard let report = deletes.take(ticket) else { return }  // wiped: told already
                guard case .success = result else { return report(result) }
                store.update(.all) { list in list?.filter { $0.id != id } }
                store.flush {
                    // The server's truth: fetched at once for the screens that show the list, else on its next read.
                    if !deletes.wasWiped(since: ticket) { store.invalidate(.all) }
                    report(result)
                }
            }
            deletes.keep(token, for: ticket)
            return
        }
        if let deleteOptimistically { return deleteOptimistically(id, report) }
        let commit = AnyLoader<Void> { completion in deleter.delete(id: id, completion: completion) }
        store.mutate(.all, { list in list?.filter { $0.id != id } }, commit: commit, completion: report)
    }

    /// Forgets everything, as on logout: cancels loads in flight and pending deletes (optimistic or not, with no
    /// ``Event/deletionFailed(id:error:)``: their completions receive ``StoreError/cleared``), goes back to idle,
    /// and empties the memory store and the database (a pending debounced save is cancelled, so nothing from before
    /// comes back). `completion` runs once both stores are empty.
    public func wipe(completion: @escaping @Sendable () -> Void = {}) {
        let cancelled = deletes.wipe()
        store.clear(completion: completion)
        for (token, report) in cancelled {
            token?.cancel()
            report(.failure(StoreError.cleared))
        }
    }
}

/// Deletes waiting for the server's answer, so that a wipe cancels them; each is answered once, by the server or
/// by the wipe.
private final class PendingDeletes: Sendable {
    typealias Report = @Sendable (Result<Void, any Error>) -> Void
    private struct Pending {
        let report: Report
        var token: (any CancellationToken)?
    }

    private let state = Locked<(next: Int, wipes: Int, pending: [Int: Pending])>((0, 0, [:]))

    /// Adds a delete; its ticket numbers it, and tells which wipes came after it.
    func add(_ report: @escaping Report) -> (id: Int, wipes: Int) {
        state.withLock { state in
            state.next += 1
            state.pending[state.next] = Pending(report: report)
            return (state.next, state.wipes)
        }
    }

    /// Keeps the token of a delete sent, to cancel on a wipe; cancels it when a wipe came while it was sent.
    func keep(_ token: any CancellationToken, for ticket: (id: Int, wipes: Int)) {
        let wiped = state.withLock { state -> Bool in
            guard state.pending[ticket.id] != nil else { return state.wipes != ticket.wipes }
            state.pending[ticket.id]!.token = token
            return false
        }
        if wiped { token.cancel() }
    }

    /// The delete's report, once: `nil` when a wipe (or the answer) took it already.
    func take(_ ticket: (id: Int, wipes: Int)) -> Report? {
        state.withLock { $0.pending.removeValue(forKey: ticket.id) }?.report
    }

    func wasWiped(since ticket: (id: Int, wipes: Int)) -> Bool {
        state.withLock { $0.wipes != ticket.wipes }
    }

    /// Takes every pending delete, to cancel and answer.
    func wipe() -> [(token: (any CancellationToken)?, report: Report)] {
        state.withLock { state in
            state.wipes += 1
            defer { state.pending = [:] }
            return state.pending.sorted { $0.key < $1.key }.map { ($0.value.token, $0.value.report) }
        }
    }
}

/// The deleter of a composition built without one: every deletion fails.
private struct MissingDeleter: FriendDeleting {
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
    {
        completion(.failure(FriendsRepository.DeletionUnavailable()))
        return AnyCancellationToken {}
    }
}
