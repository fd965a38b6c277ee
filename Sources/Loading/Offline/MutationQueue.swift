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
/// try await outbox.enqueue("u3")   // on disk, shown at once, sent when the network allows
/// ```
///
/// - **Durable first**: ``enqueue(_:)`` saves the mutation before it returns, then shows it at once as
///   an optimistic change of its key (``Store/mutate(_:_:commit:completion:)``): in a store sharing entities
///   (`entities:`), the copies it makes show in every key holding them, in every store, and are confirmed or undone
///   with it. A launch shows every saved mutation again, the same way, before it sends anything (the copies reach
///   the other keys when the mutation's key holds a value then).
/// - **In order, one at a time**: the oldest mutation is sent first, and the next only once it is settled; nothing
///   is sent while `connectivity` is offline. The store shows the queue's mutations in that same order, whatever
///   order concurrent callers' saves finish in. Each attempt is counted in the storage before it is sent, and
///   carries the mutation's id as its idempotency key, so a server that honours it applies a mutation sent twice
///   (an answer lost to a crash) once.
/// - **Settled alone**: a mutation the server accepts joins the store's confirmed value (written to every level),
///   and leaves the storage only once every level's save ended (a kill before leaves it kept, to send again); the
///   next is sent then. One it refuses (`isRefused`) is undone alone, leaves the storage, and the next is sent.
///   Any other failure is transient: the mutation stays first, and is sent again after `retryDelays` (its
///   attempts count) or as soon as the network comes back. `onSettled` is told how each mutation ended, restored
///   ones included.
/// - **Conflicts the app resolves**: with `conflicts:` (``MutationConflicts``), a failure that carries the server's
///   copy confirms that copy under the change, and the app rebases, merges, keeps the server's copy, or asks.
/// - **A logout drops them**: ``Store/clear(completion:)`` first stops the queue (it starts nothing more, and the
///   attempt in flight is cancelled: its answer, if one still comes, changes nothing), then forgets every mutation,
///   in memory at once and in the storage as soon as no save is under way; their completions receive
///   ``StoreError/cleared``, before the clear's, and the copies they showed in other stores are undone. The clear
///   never waits on its caller's thread: with a save under way (a slow disk) it returns at once, and its completion
///   comes once the save landed and its file was removed. An enqueue that a clear overtakes while it saves throws
///   ``StoreError/cleared``, and nothing of it is shown, sent or kept.
/// - **Processes sharing a folder** (an app and its extension over one ``FileMutationStorage``): one process sends
///   at a time, and a mutation another process sent is not sent again: it is undone here, its key is invalidated,
///   and it ends as ``SettledMutation/Outcome/sentByAnotherProcess``. With a store following the other processes'
///   changes (`sharing:`), that happens as soon as the value the other process confirmed arrives, online or not, so
///   the change is never shown twice.
/// - **In a background task**, ``sendPending(within:clock:)`` sends what fits in the time given, and reports.
/// - ``outcome(of:)`` awaits how a mutation ended, and ``waitUntilSettled()`` returns once none is left.
/// - ``pending`` and ``pendingMutations`` list the mutations with their status and attempts; ``isMutating`` says
///   whether any is left. Keep the queue for as long as the app runs: its pending mutations keep it alive.
public final class MutationQueue<Key: Hashable & Sendable, Value: Sendable, Input: Sendable>: Sendable {
    // Read by the queue's parts in the files beside this one (showing and settling, sending, sending within a
    // budget); none is replaced after `init`, and what changes lives in the ledger.
    let store: Store<Key, Value>
    let storage: any MutationStorage<Input>
    /// The storage's claim of a mutation for an attempt, when other processes may send from it too.
    let claim: (@Sendable (StoredMutation<Input>) throws -> MutationSendingClaim)?
    /// With a storage shared by processes: whether it keeps a mutation still (no process settled it).
    let isKept: (@Sendable (StoredMutation<Input>) -> Bool)?
    let connectivity: (any ConnectivityMonitor)?
    let retryDelays: Backoff
    let scheduler: any Scheduler
    let key: @Sendable (Input) -> Key
    let change: @Sendable (Input, Value?) -> Value?
    let send: @Sendable (Input, _ idempotencyKey: String) -> AnyLoader<Void>
    let isRefused: @Sendable (any Error) -> Bool
    /// How a conflict is found in a failure, and resolved.
    let conflicts: MutationConflicts<Value, Input>?
    /// How the mutations that create items offline are sent, and their ids followed.
    let creation: OfflineCreation<Input>?
    /// How the value a key shows names the items created offline, to rewrite it with an id the server gave.
    let replacingIDsInValue: (@Sendable (Value, _ serverID: (String) -> String?) -> Value)?
    let onStorageFailure: @Sendable (any Error) -> Void
    let onSettled: @Sendable (SettledMutation<Input>) -> Void
    /// The queue's identity in the store's order of pending changes.
    let identity = MutationQueueIdentity.next()
    /// What the queue knows; each of its steps is taken whole under this lock (see ``MutationLedger``).
    let ledger = Locked(MutationLedger())
    /// The outcomes settled lately, and the callers waiting for one (see ``outcome(of:)``).
    let awaiting = Locked(MutationOutcomes())
    /// The version of the list, published after each change (the list itself is built only for observers).
    let versions = CurrentValueStreamSubject<Int, Never>(0)
    let trampoline = Trampoline()
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
    ///     acceptance. With `creation`, it is never given a mutation that creates an item: `creation` sends those.
    ///   - isRefused: whether a failure of `send` is the server refusing the mutation (it is then undone and
    ///     dropped); any other failure is transient.
    ///   - conflicts: how a failure of `send` that carries the server's copy (a conflict) is found, and what is done
    ///     with its mutation (see ``MutationConflicts``); `nil`: every failure is refused or transient.
    ///   - creation: how mutations that create items offline, under temporary ids, are sent, and the ids the server
    ///     gives them followed (see ``OfflineCreation``); `nil`: every mutation is sent with `send`.
    ///   - replacingIDsInValue: with `creation`, returns a value a key shows with each id that `serverID` knows
    ///     replaced by the id it returns, which must be what the mutations rewritten alike show. A creation's answer
    ///     then rewrites what its keys show instead of applying their pending changes again, so a replay costs the
    ///     same per mutation however many wait behind. Return the value as it is when it names no items; `nil`:
    ///     the pending changes are applied again (an answer costs what applying those on its key costs).
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
        conflicts: MutationConflicts<Value, Input>? = nil,
        creation: OfflineCreation<Input>? = nil,
        replacingIDsInValue: (@Sendable (Value, _ serverID: (String) -> String?) -> Value)? = nil,
        onStorageFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        onSettled: @escaping @Sendable (SettledMutation<Input>) -> Void = { _ in }
    ) throws where Storage.Input == Input {
        self.store = store
        self.storage = storage
        let shared = storage as? any ProcessSharedMutationStorage<Input>
        if let shared {
            claim = { mutation in try shared.claimForSending(mutation) }
            isKept = { mutation in shared.keeps(mutation) }
        } else {
            (claim, isKept) = (nil, nil)
        }
        self.connectivity = connectivity
        self.retryDelays = retryDelays
        self.scheduler = scheduler
        self.key = key
        self.change = change
        self.send = { input, idempotencyKey in AnyLoader(send(input, idempotencyKey)) }
        self.isRefused = isRefused
        self.conflicts = conflicts
        self.creation = creation
        self.replacingIDsInValue = replacingIDsInValue
        self.onStorageFailure = onStorageFailure
        self.onSettled = onSettled
        let loaded = try shared?.loadAll(reportingUnreadable: onStorageFailure) ?? storage.loadAll()
        // One mutation per id (a copied file, a storage that kept one twice), in queue order.
        var seen = Set<String>()
        let kept = loaded.sorted { $0.sequence < $1.sequence }.filter { seen.insert($0.id).inserted }
        store.addClearObserver(self)
        let clears = store.clearCount
        // The creations answered before a kill: their ids are known, and rewritten into what is enqueued now.
        let assigned = kept.compactMap { record in
            record.serverID.flatMap { server in creation?.temporaryID(record.input).map { ($0, server) } }
        }
        let names = creation.map { creation in kept.map { creation.rewriting($0.input, with: [:]).names } } ?? []
        awaiting.withLock { outcomes in for record in kept { outcomes.expect(record.id) } }
        let erased = kept.map(\.erased)
        ledger.withLock { $0.restore(erased, names: names, serverIDs: assigned) }
        for record in kept where !show(record, numberedBefore: nil, storeClears: clears) {
            forget(record)
            forgetAwaited(record.id)
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
        ledger.withLock { $0.list }.map(PendingMutation.init)
    }

    /// The id the server gave the item created offline under `temporaryID` (see ``OfflineCreation``), once its
    /// creation was accepted; the queue knows the most recent ones given since it started, and those of the creations
    /// still queued.
    public func serverID(for temporaryID: String) -> String? {
        ledger.withLock { $0.serverID(for: temporaryID) }
    }

    /// Whether any mutation is not settled yet (a "sending…" badge).
    public var isMutating: Bool {
        ledger.withLock { !$0.isEmpty }
    }

    /// ``pending`` now, then after every change (a mutation added, sent, failed for a while, or settled).
    public var pendingMutations: EventStream<[PendingMutation<Input>], Never> {
        let ledger = ledger
        return versions.stream.map { _ in ledger.withLock { $0.list }.map(PendingMutation<Input>.init) }
    }

    /// Saves `input` as a mutation, shows it at once, and sends it when its turn and the network come. Returns its
    /// id, once it is saved; `completion` receives its outcome: a success once the server accepted it and the
    /// store saved it, the server's refusal, or ``StoreError/cleared`` when a logout dropped it.
    /// - Throws: the storage's error when the mutation could not be saved, or ``StoreError/cleared`` when a clear of
    ///   the store began while it was saved or shown; then nothing is shown, sent or kept, `completion` is not called
    ///   and `onSettled` is not told. A mutation discarded meanwhile (with the creation of an item it names) is not
    ///   an error: the enqueue returns, and `onSettled` is told it was discarded.
    @discardableResult
    public func enqueue(
        _ input: Input, completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) throws -> String {
        // Another process's logout recorded before now comes first: this mutation is the next user's.
        store.learnOtherProcessesChanges()
        let storeClears = store.clearCount
        // Numbered and placed in the queue together, so that concurrent callers keep one order in memory, on disk
        // and in the store; not sent before it is shown (its commit is not there yet).
        let (id, now) = (UUID().text, Date())
        awaiting.withLock { $0.expect(id) }
        let (record, saves, clears) =
            if let creation {
                add(input, id: id, createdAt: now, rewritingWith: creation, completion: completion)
            } else {
                typed(ledger.withLock { $0.add(input, id: id, createdAt: now, completion: completion) })
            }
        do {
            try saveAdded(record)
        } catch {
            saves.leave()
            _ = drop(record.id)
            forgetAwaited(record.id)
            throw error
        }
        saves.leave()
        guard show(record, numberedBefore: clears, storeClears: storeClears) else {
            forget(record)
            forgetAwaited(record.id)
            throw StoreError.cleared
        }
        pump()
        return record.id
    }

    /// Gives up mutation `id`: it is undone in the store, forgotten by the storage, and never sent again (an attempt
    /// in flight is cancelled). Its completion is not called; `onSettled` is told it was discarded.
    /// A discarded creation takes the mutations naming its item with it.
    public func discard(_ id: String) {
        guard let entry = takeOut(id) else { return }
        let input: Input = typedInput(entry.record.input)
        settledNow(SettledMutation(id: id, input: input, outcome: .discarded))
        if let temporary = creation?.temporaryID(input) {
            takeOutNaming(temporary, because: nil)
        }
        pump()
    }

    /// Adds `input` for a queue that creates items offline: named by a temporary id whose item the server created
    /// already, it is rewritten to the server's id first (again if another id comes meanwhile).
    private func add(
        _ input: Input, id: String, createdAt: Date, rewritingWith creation: OfflineCreation<Input>,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (record: StoredMutation<Input>, saves: DispatchGroup, clears: Int) {
        var input = input
        while true {
            let known = ledger.withLock { $0.knownServerIDs }
            let (rewritten, names) = creation.rewriting(input, with: known.ids)
            input = rewritten ?? input
            let added = ledger.withLock {
                $0.add(
                    input, id: id, createdAt: createdAt, naming: names, serverIDs: known.version,
                    completion: completion)
            }
            if let added { return typed(added) }
        }
    }

    /// What the ledger's `add` returned, its record typed.
    private func typed(
        _ added: (record: StoredMutation<any Sendable>, saves: DispatchGroup, clears: Int)
    ) -> (record: StoredMutation<Input>, saves: DispatchGroup, clears: Int) {
        (StoredMutation(added.record), added.saves, added.clears)
    }

    /// Saves `record`, just added, and again when its input was rewritten while it was saved (an id the server
    /// gave): the storage ends with the rewritten one. Without creations nothing is rewritten.
    private func saveAdded(_ record: StoredMutation<Input>) throws {
        try storage.save(record)
        guard creation != nil else { return }
        var rewrites = 0
        while let now = ledger.withLock({ $0.rewrites(of: record.id) }), now != rewrites,
            let current = ledger.withLock({ $0.record(record.id) })
        {
            try storage.save(StoredMutation<Input>(current))
            rewrites = now
        }
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
