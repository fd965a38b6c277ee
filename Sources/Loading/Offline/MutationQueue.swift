#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Changes made while offline, or whose commit fails for a while, that survive a restart: a durable outbox over a
/// ``Store``.
///
/// ```swift
/// let outbox = try MutationQueue(
///     store: friends,                                                  // Store<String, [Friend]>
///     storage: FileMutationStorage<String>(directory: support.appendingPathComponent("deletes")),
///     connectivity: connectivity,
///     key: { _ in "all" },
///     change: { id, list in list?.filter { $0.id != id } },
///     send: { id, idempotencyKey in api.deleteFriend(id, idempotencyKey: idempotencyKey) },
///     isRefused: { error in (error as? APIError)?.isRefusal == true })
/// try outbox.enqueue("u3")   // on disk, shown at once, sent when the network allows
/// ```
///
/// - **Durable first**: ``enqueue(_:completion:)`` saves the mutation before it returns, then shows it at once as
///   an optimistic change of its key (``Store/mutate(_:_:commit:completion:)``). A launch shows every saved mutation
///   again, the same way, before it sends anything.
/// - **In order, one at a time**: the oldest mutation is sent first, and the next only once it is settled; nothing
///   is sent while `connectivity` is offline. Each attempt carries the mutation's id as its idempotency key, so a
///   server that honours it applies a mutation sent twice (an answer lost to a crash) once.
/// - **Settled alone**: a mutation the server accepts joins the store's confirmed value (written to every level),
///   then leaves the storage; one it refuses (`isRefused`) is undone alone, leaves the storage, and the next is sent.
///   Any other failure is transient: the mutation stays first, and is sent again after `retryDelays` (its
///   attempts count) or as soon as the network comes back.
/// - **A logout drops them**: ``Store/clear(completion:)`` cancels the store's pending changes, and with them the
///   queue's mutations (their completions receive ``StoreError/cleared``; the storage forgets them).
/// - ``pending`` and ``changes`` list the mutations with their status and attempts; ``isMutating`` says whether any
///   is left. Keep the queue for as long as the app runs: its pending mutations keep it alive.
public final class MutationQueue<Key: Hashable & Sendable, Value: Sendable, Input: Sendable>: Sendable {
    private struct Entry: Sendable {
        var record: StoredMutation<Input>
        var status: PendingMutation<Input>.Status = .waiting
        var lastError: (any Error)?
        /// The store's commit of the change, waiting for the server's answer.
        var commit: LoadCompletion<Void>?
        /// Cancels the change in the store (it is then undone).
        var undo: (any CancellationToken)?
        var completion: (@Sendable (Result<Void, any Error>) -> Void)?
    }

    /// The mutations by id, in queue order: looking one up, adding one and taking the first out cost O(1).
    private struct Entries: Sendable {
        private var byID: [String: Entry] = [:]
        private var order: [String] = []
        private var head = 0

        var isEmpty: Bool { byID.isEmpty }

        subscript(id: String) -> Entry? {
            get { byID[id] }
            set { byID[id] = newValue }
        }

        mutating func append(_ entry: Entry) {
            byID[entry.record.id] = entry
            order.append(entry.record.id)
        }

        /// The id of the oldest mutation left.
        mutating func firstID() -> String? {
            while head < order.count, byID[order[head]] == nil { head += 1 }
            if head > 64, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
            return head < order.count ? order[head] : nil
        }

        /// Takes mutation `id` out; says whether it was the first.
        mutating func remove(_ id: String) -> (entry: Entry, wasFirst: Bool)? {
            let wasFirst = firstID() == id
            return byID.removeValue(forKey: id).map { ($0, wasFirst) }
        }

        var inOrder: [Entry] {
            order[head...].compactMap { byID[$0] }
        }
    }

    private struct State: Sendable {
        var entries = Entries()
        /// The mutation sent, and the token of its attempt.
        var sending: (id: String, token: (any CancellationToken)?)?
        /// While a transient failure waits for its retry: the timer.
        var retry: (any CancellationToken)?
        var isWaitingToRetry = false
        var nextSequence = 0
        var version = 0

        var list: [PendingMutation<Input>] {
            entries.inOrder.map {
                PendingMutation(
                    id: $0.record.id, input: $0.record.input, createdAt: $0.record.createdAt, status: $0.status,
                    attempts: $0.record.attempts, lastError: $0.lastError)
            }
        }
    }

    private let store: Store<Key, Value>
    private let storage: any MutationStorage<Input>
    private let connectivity: (any ConnectivityMonitor)?
    private let retryDelays: Backoff
    private let scheduler: any Scheduler
    private let key: @Sendable (Input) -> Key
    private let change: @Sendable (Input, Value?) -> Value?
    private let send: @Sendable (Input, _ idempotencyKey: String) -> AnyLoader<Void>
    private let isRefused: @Sendable (any Error) -> Bool
    private let onStorageFailure: @Sendable (any Error) -> Void
    private let state = Locked(State())
    /// The version of the list, published after each change (the list itself is built only for observers).
    private let versions = CurrentValueStreamSubject<Int, Never>(0)
    private let trampoline = Trampoline()
    private let onlineStates = Locked<StreamSubscription?>(nil)

    /// Creates a queue over `store`, showing again and then sending every mutation `storage` kept.
    /// - Parameters:
    ///   - store: where the mutations show, as optimistic changes of their keys.
    ///   - storage: where they are kept until settled.
    ///   - connectivity: nothing is sent while it is offline; `nil`: always try.
    ///   - retryDelays: the wait before sending a mutation again after a transient failure (by its attempts).
    ///   - scheduler: where those waits run.
    ///   - key: the store key a mutation changes.
    ///   - change: what a mutation does to its key's value.
    ///   - send: sends a mutation to the server with its idempotency key; the load's success is the server's
    ///     acceptance.
    ///   - isRefused: whether a failure of `send` is the server refusing the mutation (it is then undone and
    ///     dropped); any other failure is transient.
    ///   - onStorageFailure: told when the storage could not record an attempt or forget a settled mutation.
    /// - Throws: a ``MutationStorageError`` when the kept mutations cannot be loaded.
    public init<Storage: MutationStorage, Sender: Loader<Void>>(
        store: Store<Key, Value>,
        storage: Storage,
        connectivity: (any ConnectivityMonitor)? = nil,
        retryDelays: Backoff = .exponential(initial: .seconds(1), maxDelay: .seconds(60)),
        scheduler: some Scheduler = .global(),
        key: @escaping @Sendable (Input) -> Key,
        change: @escaping @Sendable (Input, Value?) -> Value?,
        send: @escaping @Sendable (Input, _ idempotencyKey: String) -> Sender,
        isRefused: @escaping @Sendable (any Error) -> Bool,
        onStorageFailure: @escaping @Sendable (any Error) -> Void = { _ in }
    ) throws where Storage.Input == Input {
        self.store = store
        self.storage = storage
        self.connectivity = connectivity
        self.retryDelays = retryDelays
        self.scheduler = scheduler
        self.key = key
        self.change = change
        self.send = { input, idempotencyKey in AnyLoader(send(input, idempotencyKey)) }
        self.isRefused = isRefused
        self.onStorageFailure = onStorageFailure
        let kept = try storage.loadAll()
        state.withLock { $0.nextSequence = (kept.map(\.sequence).max() ?? -1) + 1 }
        for record in kept {
            state.withLock { $0.entries.append(Entry(record: record, completion: nil)) }
            show(record)
        }
        let subscription = connectivity?.onlineStates.sink { [weak self] isOnline in
            if isOnline { self?.networkCameBack() }
        }
        onlineStates.withLock { $0 = subscription }
        pump()
    }

    // MARK: Public

    /// The mutations not settled yet, oldest first.
    public var pending: [PendingMutation<Input>] {
        state.withLock { $0.list }
    }

    /// Whether any mutation is not settled yet (a "sending…" badge).
    public var isMutating: Bool {
        state.withLock { !$0.entries.isEmpty }
    }

    /// ``pending`` now, then after every change (a mutation added, sent, failed for a while, or settled).
    public var changes: EventStream<[PendingMutation<Input>], Never> {
        let state = state
        return versions.stream.map { _ in state.withLock { $0.list } }
    }

    /// Saves `input` as a mutation, shows it at once, and sends it when its turn and the network come. Returns its
    /// id, once it is saved; `completion` receives its outcome: a success once the server accepted it and the
    /// store saved it, the server's refusal, or ``StoreError/cleared`` when a logout dropped it.
    /// - Throws: the storage's error when the mutation could not be saved; then nothing is shown or sent.
    @discardableResult
    public func enqueue(
        _ input: Input, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) throws -> String {
        // Numbered and placed in the queue together, so that concurrent callers keep one order in memory and on disk;
        // not sent before it is shown (its commit is not there yet).
        let record = state.withLock { state in
            defer { state.nextSequence += 1 }
            let record = StoredMutation(
                id: UUID().uuidString, sequence: state.nextSequence, input: input, createdAt: Date(), attempts: 0)
            state.entries.append(Entry(record: record, completion: completion))
            return record
        }
        do {
            try storage.save(record)
        } catch {
            _ = drop(record.id)
            throw error
        }
        show(record)
        pump()
        return record.id
    }

    /// Gives up mutation `id`: it is undone in the store, forgotten by the storage, and never sent again (an attempt
    /// in flight is cancelled). Its completion is not called.
    public func discard(_ id: String) {
        guard let entry = drop(id) else { return }
        entry.undo?.cancel()
        forget(entry.record)
        pump()
    }

    // MARK: Showing and settling

    /// Shows the change of `record` (in the queue already) in the store, its commit waiting for the server.
    private func show(_ record: StoredMutation<Input>) {
        let input = record.input
        let apply: @Sendable (Value?) -> Value? = { [change] value in change(input, value) }
        let undo = store.mutate(key(input), apply, commit: Commit(queue: self, id: record.id)) { [self] result in
            settled(record, result)
        }
        state.withLock { state in
            state.entries[record.id]?.undo = undo
        }
        publish()
    }

    /// The store's commit of a mutation's change: it completes with the server's answer.
    private struct Commit: Loader {
        let queue: MutationQueue
        let id: String

        func load(completion: @escaping LoadCompletion<Void>) -> any CancellationToken {
            queue.state.withLock { state in
                state.entries[id]?.commit = completion
            }
            // Cancelled by the store (a logout; it then settles the change as cleared), or by a discard.
            return AnyCancellationToken { [queue, id] in queue.commitCancelled(id) }
        }
    }

    /// The store settled a mutation's change (accepted and saved, refused, or cleared): the storage forgets it.
    private func settled(_ record: StoredMutation<Input>, _ result: Result<Void, any Error>) {
        let entry = drop(record.id)
        forget(record)
        entry?.completion?(result)
        pump()
    }

    /// The store no longer waits for mutation `id`'s commit: an attempt in flight is cancelled, and nothing more is
    /// sent for it (the store settles it, or a discard took it out).
    private func commitCancelled(_ id: String) {
        let attempt = state.withLock { state -> (any CancellationToken)? in
            state.entries[id]?.commit = nil
            guard state.sending?.id == id else { return nil }
            defer { state.sending = nil }
            return state.sending?.token
        }
        attempt?.cancel()
    }

    /// Takes mutation `id` out of the queue, cancelling its attempt in flight, and the wait for its retry when it
    /// was first; `nil` when it was not there.
    private func drop(_ id: String) -> Entry? {
        let (entry, cancels) = state.withLock { state -> (Entry?, [any CancellationToken]) in
            var cancels: [any CancellationToken] = []
            if state.sending?.id == id, let token = state.sending?.token { cancels.append(token) }
            if state.sending?.id == id { state.sending = nil }
            guard let (entry, wasFirst) = state.entries.remove(id) else { return (nil, cancels) }
            if wasFirst {
                state.isWaitingToRetry = false
                if let timer = exchange(&state.retry, with: nil) { cancels.append(timer) }
            }
            return (entry, cancels)
        }
        for token in cancels { token.cancel() }
        if entry != nil { publish() }
        return entry
    }

    private func forget(_ record: StoredMutation<Input>) {
        do { try storage.remove(record) } catch { onStorageFailure(error) }
    }

    // MARK: Sending

    /// Sends the first mutation when nothing is being sent, no retry is waited for, and the network allows; in
    /// constant stack depth when attempts answer at once.
    private func pump() {
        trampoline.run { [self] in sendFirst() }
    }

    private func sendFirst() {
        guard connectivity?.isOnline ?? true else { return }
        let first = state.withLock { state -> StoredMutation<Input>? in
            guard state.sending == nil, !state.isWaitingToRetry, let id = state.entries.firstID(),
                var entry = state.entries[id], entry.commit != nil
            else { return nil }
            entry.status = .sending
            entry.record.attempts += 1
            state.entries[id] = entry
            state.sending = (id, nil)
            return entry.record
        }
        guard let first else { return }
        publish()
        let token = send(first.input, first.id).load { [self] result in answered(first, result) }
        state.withLock { state in
            if state.sending?.id == first.id, state.sending?.token == nil { state.sending?.token = token }
        }
    }

    /// The server answered an attempt of `record`.
    private func answered(_ record: StoredMutation<Input>, _ result: Result<Void, any Error>) {
        switch result {
        case .success:
            settle(record.id, with: .success(()))
        case .failure(let error) where isRefused(error):
            settle(record.id, with: .failure(error))
        case .failure(let error):
            waitToRetry(record, after: error)
        }
        pump()
    }

    /// Completes the store's commit of mutation `id` with the server's answer (the store then settles it).
    private func settle(_ id: String, with answer: Result<Void, any Error>) {
        let commit = state.withLock { state -> LoadCompletion<Void>? in
            if state.sending?.id == id { state.sending = nil }
            defer { state.entries[id]?.commit = nil }
            return state.entries[id]?.commit
        }
        commit?(answer)
    }

    /// Keeps `record` first after a transient failure, records its attempt, and sends it again later.
    private func waitToRetry(_ record: StoredMutation<Input>, after error: any Error) {
        let attempts = state.withLock { state -> Int? in
            guard state.sending?.id == record.id else { return nil }
            state.sending = nil
            guard var entry = state.entries[record.id] else { return nil }
            entry.status = .waiting
            entry.lastError = error
            state.entries[record.id] = entry
            state.isWaitingToRetry = true
            return entry.record.attempts
        }
        guard let attempts else { return }
        publish()
        var attempted = record
        attempted.attempts = attempts
        do { try storage.save(attempted) } catch { onStorageFailure(error) }
        let timer = scheduler.schedule(after: retryDelays.delay(beforeRetry: attempts)) { [weak self] in
            self?.retryDue()
        }
        let kept = state.withLock { state -> Bool in
            guard state.isWaitingToRetry else { return false }  // the network came back meanwhile
            state.retry = timer
            return true
        }
        if !kept { timer.cancel() }
    }

    private func retryDue() {
        state.withLock { state in
            state.isWaitingToRetry = false
            state.retry = nil
        }
        pump()
    }

    private func networkCameBack() {
        let timer = state.withLock { state in
            state.isWaitingToRetry = false
            return exchange(&state.retry, with: nil)
        }
        timer?.cancel()
        pump()
    }

    /// Tells the observers of ``changes`` that the list changed, unless a newer change was told already.
    private func publish() {
        let version = state.withLock { state in
            state.version += 1
            return state.version
        }
        versions.update { current in current < version ? version : nil }
    }
}
