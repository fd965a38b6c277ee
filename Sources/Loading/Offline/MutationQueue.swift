import Dispatch

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
///   is sent while `connectivity` is offline. The store shows the queue's mutations in that same order, whatever
///   order concurrent callers' saves finish in. Each attempt is counted in the storage before it is sent, and
///   carries the mutation's id as its idempotency key, so a server that honours it applies a mutation sent twice
///   (an answer lost to a crash) once.
/// - **Settled alone**: a mutation the server accepts joins the store's confirmed value (written to every level),
///   and leaves the storage; one it refuses (`isRefused`) is undone alone, leaves the storage, and the next is sent.
///   Any other failure is transient: the mutation stays first, and is sent again after `retryDelays` (its
///   attempts count) or as soon as the network comes back. `onSettled` is told how each mutation ended, restored
///   ones included.
/// - **A logout drops them**: ``Store/clear(completion:)`` first stops the queue (it starts nothing more, and the
///   attempt in flight is cancelled: its answer, if one still comes, changes nothing), then forgets every mutation,
///   in memory and in the storage, before the clear returns; their completions receive ``StoreError/cleared``. An
///   enqueue that a clear overtakes while it saves throws ``StoreError/cleared``, and nothing of it is shown, sent
///   or kept.
/// - **Processes sharing a folder** (an app and its extension over one ``FileMutationStorage``): one process sends
///   at a time, and a mutation another process sent is not sent again: it is undone here, its key is invalidated,
///   and it ends as ``SettledMutation/Outcome/sentByAnotherProcess``.
/// - **In a background task**, ``sendPending(within:)`` sends what fits in the time given, and reports.
/// - ``pending`` and ``pendingMutations`` list the mutations with their status and attempts; ``isMutating`` says
///   whether any is left. Keep the queue for as long as the app runs: its pending mutations keep it alive.
public final class MutationQueue<Key: Hashable & Sendable, Value: Sendable, Input: Sendable>: Sendable {
    private struct Entry: Sendable {
        var record: StoredMutation<Input>
        var status: PendingMutation<Input>.Status = .waiting
        var lastError: (any Error)?
        /// Whether its change is in the store (its save is over and no clear came first).
        var isShown = false
        /// The store's commit of the change, waiting for the server's answer.
        var commit: LoadCompletion<Void>?
        /// Cancels the change in the store (it is then undone).
        var undo: (any CancellationToken)?
        var completion: (@Sendable (Result<Void, any Error>) -> Void)?
    }

    /// The attempt in flight.
    private struct Sending: Sendable {
        let id: String
        /// Tells this attempt's answer from a late answer of an earlier one (cancelled by a logout or a discard).
        let serial: Int
        var token: (any CancellationToken)?
        /// This process's right to send from a storage shared with others, released when the attempt ends.
        var lease: MutationSendingLease?
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

        /// Takes every mutation out, in order.
        mutating func removeAll() -> [Entry] {
            defer { self = Entries() }
            return inOrder
        }

        var inOrder: [Entry] {
            order[head...].compactMap { byID[$0] }
        }
    }

    private struct State: Sendable {
        var entries = Entries()
        var sending: Sending?
        var serial = 0
        /// While a transient failure waits for its retry, or another process sends: the timer.
        var retry: (any CancellationToken)?
        var isWaitingToRetry = false
        var nextSequence = 0
        var version = 0
        /// How many clears of the store began: a mutation numbered before one is not shown after it.
        var clears = 0
        /// Clears under way: nothing is sent meanwhile.
        var clearing = 0
        /// The saves under way (enqueues writing their mutation, attempts being recorded): what a clear or a
        /// discard waits for before it removes files, so that no save lands after the removal.
        var saves = DispatchGroup()
        /// Shown mutations a clear took, told once the store is cleared.
        var cleared: [Entry] = []
        /// Calls of ``sendPending(within:clock:)`` running: while there are some, they start the attempts.
        var budgets = 0
        var watchers: [SendingWatcher<Input>] = []

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
    /// The storage's claim of a mutation for an attempt, when other processes may send from it too.
    private let claim: (@Sendable (StoredMutation<Input>) throws -> MutationSendingClaim)?
    private let connectivity: (any ConnectivityMonitor)?
    private let retryDelays: Backoff
    private let scheduler: any Scheduler
    private let key: @Sendable (Input) -> Key
    private let change: @Sendable (Input, Value?) -> Value?
    private let send: @Sendable (Input, _ idempotencyKey: String) -> AnyLoader<Void>
    private let isRefused: @Sendable (any Error) -> Bool
    private let onStorageFailure: @Sendable (any Error) -> Void
    private let onSettled: @Sendable (SettledMutation<Input>) -> Void
    /// The queue's identity in the store's order of pending changes.
    private let identity = MutationQueueIdentity.next()
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
    ///   - onStorageFailure: told when the storage could not record an attempt or forget a settled mutation, and of
    ///     each kept mutation it could not read (moved aside by ``FileMutationStorage``).
    ///   - onSettled: told how each mutation ended (accepted, refused, discarded, cleared by a logout, or sent by
    ///     another process), restored ones included.
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
        onStorageFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        onSettled: @escaping @Sendable (SettledMutation<Input>) -> Void = { _ in }
    ) throws where Storage.Input == Input {
        self.store = store
        self.storage = storage
        let shared = storage as? any ProcessSharedMutationStorage<Input>
        if let shared {
            claim = { mutation in try shared.claimForSending(mutation) }
        } else {
            claim = nil
        }
        self.connectivity = connectivity
        self.retryDelays = retryDelays
        self.scheduler = scheduler
        self.key = key
        self.change = change
        self.send = { input, idempotencyKey in AnyLoader(send(input, idempotencyKey)) }
        self.isRefused = isRefused
        self.onStorageFailure = onStorageFailure
        self.onSettled = onSettled
        let loaded = try shared?.loadAll(reportingUnreadable: onStorageFailure) ?? storage.loadAll()
        // One mutation per id (a copied file, a storage that kept one twice), in queue order.
        var seen = Set<String>()
        let kept = loaded.sorted { $0.sequence < $1.sequence }.filter { seen.insert($0.id).inserted }
        store.addClearObserver(self)
        let clears = store.clearCount
        state.withLock { state in
            state.nextSequence = (kept.map(\.sequence).max() ?? -1) + 1
            for record in kept { state.entries.append(Entry(record: record, completion: nil)) }
        }
        for record in kept where !show(record, numberedBefore: nil, storeClears: clears) {
            forget(record)
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
    public var pendingMutations: EventStream<[PendingMutation<Input>], Never> {
        let state = state
        return versions.stream.map { _ in state.withLock { $0.list } }
    }

    /// ``pending`` now, then after every change.
    @available(*, deprecated, renamed: "pendingMutations", message: "a store's changes(for:) are a key's values")
    public var changes: EventStream<[PendingMutation<Input>], Never> {
        pendingMutations
    }

    /// Saves `input` as a mutation, shows it at once, and sends it when its turn and the network come. Returns its
    /// id, once it is saved; `completion` receives its outcome: a success once the server accepted it and the
    /// store saved it, the server's refusal, or ``StoreError/cleared`` when a logout dropped it.
    /// - Throws: the storage's error when the mutation could not be saved, or ``StoreError/cleared`` when a clear of
    ///   the store began while it was saved; then nothing is shown, sent or kept, and `completion` is not called.
    @discardableResult
    public func enqueue(
        _ input: Input, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) throws -> String {
        let storeClears = store.clearCount
        // Numbered and placed in the queue together, so that concurrent callers keep one order in memory, on disk
        // and in the store; not sent before it is shown (its commit is not there yet).
        let (record, saves, clears) = state.withLock { state in
            defer { state.nextSequence += 1 }
            let record = StoredMutation(
                id: UUID().uuidString, sequence: state.nextSequence, input: input, createdAt: Date(), attempts: 0)
            state.entries.append(Entry(record: record, completion: completion))
            state.saves.enter()
            return (record, state.saves, state.clears)
        }
        do {
            try storage.save(record)
        } catch {
            saves.leave()
            _ = drop(record.id)
            throw error
        }
        saves.leave()
        guard show(record, numberedBefore: clears, storeClears: storeClears) else {
            forget(record)
            throw StoreError.cleared
        }
        pump()
        return record.id
    }

    /// Gives up mutation `id`: it is undone in the store, forgotten by the storage, and never sent again (an attempt
    /// in flight is cancelled). Its completion is not called; `onSettled` is told it was discarded.
    public func discard(_ id: String) {
        guard let entry = drop(id) else { return }
        entry.undo?.cancel()
        // A save of its attempt under way lands before it is forgotten.
        state.withLock { $0.saves }.wait()
        forget(entry.record)
        settledNow(SettledMutation(id: id, input: entry.record.input, outcome: .discarded))
        pump()
    }

    /// ``sendPending(within:clock:)`` on `ContinuousClock`: what a background task calls with the time it was given.
    ///
    /// ```swift
    /// let sending = Task { await outbox.sendPending(within: .seconds(25)) }
    /// task.expirationHandler = { sending.cancel() }  // the system wants the time back: stop
    /// let report = await sending.value
    /// task.setTaskCompleted(success: report.failure == nil)
    /// ```
    public func sendPending(within budget: Duration) async -> MutationSendingReport<Input> {
        await sendPending(within: budget, clock: ContinuousClock())
    }

    /// Sends the pending mutations, oldest first and one at a time as always, until none is left, `budget` has
    /// passed on `clock`, the calling task is cancelled (which cancels the attempt in flight: its mutation stays
    /// first), a transient failure or the network stops it, or another process sends from the storage; then returns
    /// what happened. A mutation waiting for its retry is sent at once.
    ///
    /// While it runs, the queue starts nothing on its own: no attempt starts once the deadline has passed, and one
    /// started before runs to its end. When it stops with mutations left, the queue waits its first retry delay
    /// before it sends on its own again (or until the network comes back): in a background task, the system
    /// suspends the app once it is told the task is complete.
    public func sendPending<C: Clock>(within budget: C.Duration, clock: C) async -> MutationSendingReport<Input> {
        let deadline = clock.now.advanced(by: budget)
        let watcher = SendingWatcher<Input>()
        state.withLock { state in
            state.budgets += 1
            state.watchers.append(watcher)
        }
        var report = MutationSendingReport<Input>()
        await withTaskCancellationHandler {
            var stops = false
            while !stops, !Task.isCancelled, clock.now < deadline, connectivity?.isOnline ?? true {
                guard let starts = nextStepWithinBudget() else { break }
                if starts, !sendFirst(byBudget: true), !(connectivity?.isOnline ?? true) { break }
                if Task.isCancelled { cancelAttempt() }  // cancelled as the attempt started
                for event in await watcher.next() {
                    switch event {
                    case .settled(let mutation): report.settled.append(mutation)
                    case .failedForNow(let error):
                        report.failure = error
                        stops = true
                    case .busy: stops = true
                    case .changed: break
                    }
                }
            }
        } onCancel: {
            cancelAttempt()
        }
        let isOnline = connectivity?.isOnline ?? true
        let (remaining, waits) = state.withLock { state in
            state.budgets -= 1
            state.watchers.removeAll { $0 === watcher }
            let waits =
                isOnline && state.budgets == 0 && state.sending == nil && !state.isWaitingToRetry
                && !state.entries.isEmpty
            if waits { state.isWaitingToRetry = true }
            return (state.list, waits)
        }
        report.remaining = remaining
        if waits { scheduleRetry(after: retryDelays.delay(beforeRetry: 1)) } else { pump() }
        return report
    }

    /// For a call sending within a budget: `nil` when no mutation is left, `true` when it starts the first (a retry
    /// waited for is not waited for any more), `false` when an attempt runs already.
    private func nextStepWithinBudget() -> Bool? {
        let (step, timer) = state.withLock { state -> (Bool?, (any CancellationToken)?) in
            guard state.entries.firstID() != nil else { return (nil, nil) }
            guard state.sending == nil else { return (false, nil) }
            state.isWaitingToRetry = false
            return (true, state.retry.take())
        }
        timer?.cancel()
        return step
    }

    /// Cancels the attempt in flight (its mutation stays first, waiting), for a call sending within a budget whose
    /// task was cancelled.
    private func cancelAttempt() {
        let attempt = state.withLock { state -> Sending? in
            guard let attempt = state.sending.take() else { return nil }
            state.entries[attempt.id]?.status = .waiting
            return attempt
        }
        if attempt != nil {
            end(attempt)
            publish()
        }
        tell(.changed)
    }

    // MARK: Showing and settling

    /// Shows the change of `record` (in the queue already) in the store, its commit waiting for the server; `false`,
    /// showing nothing, when a clear began since the mutation was numbered (`numberedBefore` clears) or since
    /// `storeClears` was read. The mutation is then out of the queue.
    private func show(_ record: StoredMutation<Input>, numberedBefore clears: Int?, storeClears: Int) -> Bool {
        if let clears, state.withLock({ $0.clears != clears }) {
            _ = drop(record.id)
            return false
        }
        let input = record.input
        let apply: @Sendable (Value?) -> Value? = { [change] value in change(input, value) }
        let undo = store.mutate(
            key(input), apply, commit: Commit(queue: self, id: record.id),
            order: MutationOrder(queue: identity, sequence: record.sequence), unlessClearedSince: storeClears
        ) { [self] result in
            settled(record, result)
        }
        guard let undo else {
            _ = drop(record.id)
            return false
        }
        let kept = state.withLock { state -> Bool in
            guard clears.map({ $0 == state.clears }) ?? true, state.entries[record.id] != nil else { return false }
            state.entries[record.id]!.undo = undo
            state.entries[record.id]!.isShown = true
            return true
        }
        guard kept else {
            // A clear began while it was being shown: it is undone, and the clear cancels it too.
            undo.cancel()
            _ = drop(record.id)
            return false
        }
        publish()
        return true
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
        guard let entry else { return }  // a clear, a discard or another process took it already
        entry.completion?(result)
        let outcome: SettledMutation<Input>.Outcome =
            switch result {
            case .success: .accepted
            case .failure(let error as StoreError) where error == .cleared: .cleared
            case .failure(let error): .refused(error)
            }
        settledNow(SettledMutation(id: record.id, input: record.input, outcome: outcome))
        pump()
    }

    /// Tells `onSettled`, and the calls sending within a budget, how a mutation ended.
    private func settledNow(_ mutation: SettledMutation<Input>) {
        onSettled(mutation)
        tell(.settled(mutation))
    }

    /// Tells the calls sending within a budget what happened.
    private func tell(_ event: SendingWatcher<Input>.Event) {
        for watcher in state.withLock({ $0.watchers }) { watcher.tell(event) }
    }

    /// The store no longer waits for mutation `id`'s commit: an attempt in flight is cancelled, and nothing more is
    /// sent for it (the store settles it, or a discard took it out).
    private func commitCancelled(_ id: String) {
        let attempt = state.withLock { state -> Sending? in
            state.entries[id]?.commit = nil
            guard state.sending?.id == id else { return nil }
            return state.sending.take()
        }
        end(attempt)
    }

    /// Takes mutation `id` out of the queue, cancelling its attempt in flight, and the wait for its retry when it
    /// was first; `nil` when it was not there.
    private func drop(_ id: String) -> Entry? {
        let (entry, attempt, timer) = state.withLock { state -> (Entry?, Sending?, (any CancellationToken)?) in
            let attempt = state.sending?.id == id ? state.sending.take() : nil
            guard let (entry, wasFirst) = state.entries.remove(id) else { return (nil, attempt, nil) }
            guard wasFirst else { return (entry, attempt, nil) }
            state.isWaitingToRetry = false
            return (entry, attempt, state.retry.take())
        }
        end(attempt)
        timer?.cancel()
        if entry != nil { publish() }
        return entry
    }

    /// Ends an attempt taken out of the state: its load is cancelled and its lease released.
    private func end(_ attempt: Sending?) {
        attempt?.token?.cancel()
        attempt?.lease?.release()
    }

    private func forget(_ record: StoredMutation<Input>) {
        do { try storage.remove(record) } catch { onStorageFailure(error) }
    }

    // MARK: Sending

    /// Sends the first mutation when nothing is being sent, no retry is waited for, no clear is under way, and the
    /// network allows; in constant stack depth when attempts answer at once. While calls send within a budget, they
    /// start the attempts, and are told instead.
    private func pump() {
        trampoline.run { [self] in _ = sendFirst() }
    }

    /// Starts an attempt of the first mutation when it can; whether it started one. `byBudget`: asked by a call of
    /// ``sendPending(within:clock:)``, which alone starts attempts while it runs.
    private func sendFirst(byBudget: Bool = false) -> Bool {
        guard connectivity?.isOnline ?? true else { return false }
        var held = false
        let first = state.withLock { state -> (StoredMutation<Input>, Int, DispatchGroup)? in
            guard byBudget || state.budgets == 0 else {
                held = true
                return nil
            }
            guard state.sending == nil, !state.isWaitingToRetry, state.clearing == 0, let id = state.entries.firstID(),
                let entry = state.entries[id], entry.commit != nil
            else { return nil }
            state.serial += 1
            state.sending = Sending(id: id, serial: state.serial)
            // Recording the attempt is a save a clear waits for.
            state.saves.enter()
            return (entry.record, state.serial, state.saves)
        }
        guard let (record, serial, saves) = first else {
            if held { tell(.changed) }
            return false
        }
        let lease: MutationSendingLease?
        do {
            switch try claim?(record) ?? .claimed(nil) {
            case .claimed(let claimed): lease = claimed
            case .busy:
                saves.leave()
                anotherProcessSends(serial)
                return false
            case .gone:
                saves.leave()
                sentElsewhere(record, serial)
                return false
            }
        } catch {
            // The storage cannot say: sent as if this process were alone.
            onStorageFailure(error)
            lease = nil
        }
        var attempted = record
        attempted.attempts += 1
        do { try storage.save(attempted) } catch { onStorageFailure(error) }
        saves.leave()
        let proceeds = state.withLock { state -> Bool in
            guard state.sending?.serial == serial, var entry = state.entries[record.id] else { return false }
            entry.status = .sending
            entry.record.attempts = attempted.attempts
            state.entries[record.id] = entry
            state.sending?.lease = lease
            return true
        }
        guard proceeds else {
            lease?.release()
            return false
        }
        publish()
        let token = send(record.input, record.id).load { [self] result in answered(record, serial, result) }
        let kept = state.withLock { state -> Bool in
            guard state.sending?.serial == serial else { return false }
            state.sending?.token = token
            return true
        }
        if !kept { token.cancel() }  // answered already, or cancelled meanwhile
        return true
    }

    /// The server answered attempt `serial` of `record`; an answer of an attempt that was cancelled (a logout, a
    /// discard) changes nothing.
    private func answered(_ record: StoredMutation<Input>, _ serial: Int, _ result: Result<Void, any Error>) {
        switch result {
        case .success:
            settle(record, serial, with: .success(()))
        case .failure(let error) where isRefused(error):
            settle(record, serial, with: .failure(error))
        case .failure(let error):
            waitToRetry(record, serial, after: error)
        }
        pump()
    }

    /// Completes the store's commit of `record` with the server's answer (the store then settles it). The storage
    /// forgets it at once, before the attempt's lease is released: another process never sends it again.
    private func settle(_ record: StoredMutation<Input>, _ serial: Int, with answer: Result<Void, any Error>) {
        let taken = state.withLock { state -> (Sending, LoadCompletion<Void>?)? in
            guard state.sending?.serial == serial, let attempt = state.sending.take() else { return nil }
            return (attempt, state.entries[record.id]?.commit.take())
        }
        guard let (attempt, commit) = taken else { return }
        forget(record)
        attempt.lease?.release()
        commit?(answer)
    }

    /// Keeps `record` first after a transient failure, and sends it again later.
    private func waitToRetry(_ record: StoredMutation<Input>, _ serial: Int, after error: any Error) {
        let taken = state.withLock { state -> (Sending, Int)? in
            guard state.sending?.serial == serial, let attempt = state.sending.take(),
                var entry = state.entries[record.id]
            else { return nil }
            entry.status = .waiting
            entry.lastError = error
            state.entries[record.id] = entry
            state.isWaitingToRetry = true
            return (attempt, entry.record.attempts)
        }
        guard let (attempt, attempts) = taken else { return }
        attempt.lease?.release()
        publish()
        tell(.failedForNow(error))
        scheduleRetry(after: retryDelays.delay(beforeRetry: attempts))
    }

    /// Another process sends from the storage now: this one tries again a moment later.
    private func anotherProcessSends(_ serial: Int) {
        let waits = state.withLock { state -> Bool in
            guard state.sending?.serial == serial else { return false }
            state.sending = nil
            state.isWaitingToRetry = true
            return true
        }
        guard waits else { return }
        tell(.busy)
        scheduleRetry(after: .milliseconds(200))
    }

    /// Another process sent `record` already (the storage no longer keeps it): it is undone here, and its key is
    /// invalidated so that what the server holds now is fetched.
    private func sentElsewhere(_ record: StoredMutation<Input>, _ serial: Int) {
        let entry = state.withLock { state -> Entry? in
            guard state.sending?.serial == serial else { return nil }
            state.sending = nil
            return state.entries.remove(record.id)?.entry
        }
        guard let entry else { return pump() }
        publish()
        entry.undo?.cancel()
        store.invalidate(key(record.input))
        entry.completion?(.failure(MutationQueueError.sentByAnotherProcess))
        settledNow(SettledMutation(id: record.id, input: record.input, outcome: .sentByAnotherProcess))
        pump()
    }

    private func scheduleRetry(after delay: Duration) {
        let timer = scheduler.schedule(after: delay) { [weak self] in
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
            return state.retry.take()
        }
        timer?.cancel()
        pump()
    }

    /// Tells the observers of ``pendingMutations`` that the list changed, unless a newer change was told already.
    private func publish() {
        let version = state.withLock { state in
            state.version += 1
            return state.version
        }
        versions.update { current in current < version ? version : nil }
    }
}

extension MutationQueue: StoreClearObserver {
    /// A logout begins: nothing more is sent, the attempt in flight is cancelled, and every mutation is taken out of
    /// the queue and the storage (once the saves under way have landed) before the store cancels anything.
    func storeWillClear() {
        let (taken, attempt, timer, saves) = state.withLock { state in
            state.clears += 1
            state.clearing += 1
            state.isWaitingToRetry = false
            let saves = state.saves
            state.saves = DispatchGroup()
            return (state.entries.removeAll(), state.sending.take(), state.retry.take(), saves)
        }
        attempt?.token?.cancel()
        timer?.cancel()
        saves.wait()
        for entry in taken { forget(entry.record) }
        attempt?.lease?.release()
        state.withLock { $0.cleared += taken.filter { $0.isShown } }
        if !taken.isEmpty { publish() }
    }

    /// The logout is over: the mutations it took are told, and what is enqueued from now on is sent.
    func storeDidClear() {
        let cleared = state.withLock { state in
            state.clearing -= 1
            return exchange(&state.cleared, with: [])
        }
        for entry in cleared {
            entry.completion?(.failure(StoreError.cleared))
            settledNow(SettledMutation(id: entry.record.id, input: entry.record.input, outcome: .cleared))
        }
        pump()
    }
}

/// Numbers the mutation queues, for the store's order of their pending changes.
enum MutationQueueIdentity {
    private static let counter = Locked(0)

    static func next() -> Int {
        counter.withLock { counter in
            counter += 1
            return counter
        }
    }
}
