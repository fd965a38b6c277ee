import Dispatch

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A mutation's change in the store: its id there, and the key it was shown under.
struct ShownChange: Sendable {
    let id: Int
    let key: any Hashable & Sendable
}

/// What a ``MutationQueue`` knows, under its lock: the mutations in queue order, the items they name, the saves and
/// clears under way, and when it may send (``MutationSending``).
///
/// Each method is one step of the queue, taken whole under the lock; it changes no more than what it names and hands
/// out what must be cancelled, released or told after unlocking. It runs no user code and touches no storage.
///
/// Invariants:
/// - An attempt is for the first mutation, and at most one runs (``MutationSending``): only the attempt running may
///   settle, fail or record anything.
/// - A mutation numbered before a clear began is never shown after it: `clears` counts the clears begun.
///
/// Compiled once, not per queue: it keeps the inputs as `any Sendable`, and the queue's typed face converts the
/// records it hands in and out (``StoredMutation/erased``), so that a step under the lock looks up no generic type
/// at run time.
struct MutationLedger: Sendable {
    /// A mutation's input: a value of the queue's input type, as `any Sendable`.
    typealias Input = any Sendable

    /// A mutation in the queue.
    struct Entry: Sendable {
        fileprivate(set) var record: StoredMutation<Input>
        fileprivate(set) var status: PendingMutation<Input>.Status = .waiting
        fileprivate(set) var lastError: (any Error)?
        /// Whether the server answered it with a conflict not resolved yet: it holds the queue.
        fileprivate(set) var isConflicted = false
        /// The server's copy its conflict came with (the queue's value type), while it waits, in this launch.
        fileprivate(set) var serverCopy: (any Sendable)?
        /// Whether its change is in the store (its save is over and no clear came first).
        fileprivate(set) var isShown = false
        /// The store's commit of the change, waiting for the server's answer.
        fileprivate var commit: LoadCompletion<Void>?
        /// Cancels the change in the store (it is then undone).
        fileprivate(set) var undo: (any CancellationToken)?
        /// Its change in the store, to show again when its input is rewritten (an id the server gave).
        fileprivate(set) var shown: ShownChange?
        /// How often its input was rewritten: a save that began before a rewrite is made again after it.
        fileprivate(set) var rewrites = 0
        /// The ids of the items its input names (see ``OfflineCreation``).
        fileprivate(set) var names: [String] = []
        /// For a creation the server answered: the changes of its key rewritten with the server's id (its own
        /// included), shown when the store confirms it, in the same publication.
        fileprivate(set) var replacedOnAccept: [(shown: ShownChange, input: Input)] = []
        /// For a creation the server answered: the store's ``Store/changesMade`` before its id was known (what its
        /// key shows is rewritten with the id only when made of changes up to it).
        fileprivate(set) var shownUpToOnAccept = 0
        let completion: (@Sendable (Result<Void, any Error>) -> Void)?
    }

    /// The attempt in flight.
    typealias Attempt = MutationSending.Attempt

    /// What ``beginAttempt(byBudget:)`` decided.
    enum Start {
        /// Nothing to send now.
        case none
        /// Calls sending within a budget start the attempts now: they are told instead.
        case heldForBudget
        /// An attempt of `record` begins: its storage save is one of `saves`.
        case attempt(StoredMutation<Input>, serial: Int, saves: DispatchGroup)
    }

    /// What a clear took out, for the queue to cancel, release and forget after unlocking.
    struct ClearTaken: Sendable {
        let entries: [Entry]
        let attempt: Attempt?
        let retry: (any CancellationToken)?
        /// The saves under way when the clear began: the files they write are removed once they have landed.
        let saves: DispatchGroup
    }

    private var entries = QueuedMutations()
    private var sending = MutationSending()
    private var nextSequence = 0
    private var version = 0
    /// How many clears of the store began: a mutation numbered before one is not shown after it.
    private var clears = 0
    /// The saves under way (enqueues writing their mutation, attempts being recorded): what a clear or a discard waits
    /// for before it removes files, so that no save lands after the removal.
    private var saves = DispatchGroup()
    /// Shown mutations a clear took, told once the store is cleared.
    private var cleared: [Entry] = []
    /// The mutations naming each item, and the ids the server gave the items created offline.
    private var items = NamedItems()

    // MARK: The list

    /// The mutations not settled yet, oldest first.
    var list: [PendingMutation<Input>] {
        entries.inOrder.map {
            PendingMutation(
                id: $0.record.id, input: $0.record.input, createdAt: $0.record.createdAt, status: $0.status,
                attempts: $0.record.attempts, lastError: $0.lastError, awaitsResolution: $0.record.awaitsResolution)
        }
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The calls sending within a budget, to tell what happened.
    var budgetWatchers: [any BudgetWatcher] { sending.watchers }

    /// The saves under way, for a discard to wait for.
    var savesUnderWay: DispatchGroup { saves }

    /// The next version of the list, once it changed.
    mutating func nextVersion() -> Int {
        version += 1
        return version
    }

    // MARK: Adding and showing

    /// Puts back the mutations a storage kept, in queue order, with the ids each names (`names`, when the queue has
    /// creations) and the server ids their creations were given; the next one is numbered after them.
    mutating func restore(
        _ records: [StoredMutation<Input>], names: [[String]] = [], serverIDs assigned: [(String, String)] = []
    ) {
        nextSequence = (records.map(\.sequence).max() ?? -1) + 1
        for (index, record) in records.enumerated() {
            var entry = Entry(record: record, completion: nil)
            entry.isConflicted = record.awaitsResolution
            append(consume entry, naming: index < names.count ? names[index] : [])
        }
        for (temporary, server) in assigned { items.assign(server, to: temporary) }
    }

    /// Puts `entry` last, naming the items `names`.
    private mutating func append(_ entry: consuming Entry, naming names: [String]) {
        var entry = entry
        entry.names = names
        items.add(entry.record.id, naming: names)
        entries.append(entry)
    }

    /// Takes mutation `id` out of the queue and of the items it names.
    private mutating func takeOut(_ id: String) -> (entry: Entry, wasFirst: Bool)? {
        guard let taken = entries.remove(id) else { return nil }
        items.remove(id, naming: taken.entry.names)
        return taken
    }

    /// The server ids given so far, by temporary id, with their version (for an enqueue).
    var knownServerIDs: (ids: [String: String], version: Int) {
        (items.known, items.version)
    }

    /// The server id given to temporary id `temporary`, if it is known still.
    func serverID(for temporary: String) -> String? {
        items.serverID(for: temporary)
    }

    /// ``add(_:id:createdAt:completion:)`` unless a server id was given since version `serverIDs` of them was read:
    /// `nil` then, adding nothing (the input is rewritten again first).
    mutating func add(
        _ input: Input, id: String, createdAt: Date, naming names: [String], serverIDs version: Int,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (record: StoredMutation<Input>, saves: DispatchGroup, clears: Int)? {
        guard version == items.version else { return nil }
        return add(input, id: id, createdAt: createdAt, naming: names, completion: completion)
    }

    /// Numbers a new mutation and puts it last, its save counted among the saves under way (the caller leaves
    /// `saves` once it is written). Returns the clears begun so far, to show it only if no clear begins meanwhile.
    mutating func add(
        _ input: Input, id: String, createdAt: Date, naming names: [String] = [],
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (record: StoredMutation<Input>, saves: DispatchGroup, clears: Int) {
        let record = StoredMutation(id: id, sequence: nextSequence, input: input, createdAt: createdAt, attempts: 0)
        nextSequence += 1
        append(Entry(record: record, completion: completion), naming: names)
        saves.enter()
        return (record, saves, clears)
    }

    /// Whether a clear began since `clears` were counted.
    func clearBegan(since clears: Int) -> Bool {
        self.clears != clears
    }

    /// Marks mutation `id` shown as `change`, with `undo` to take it back; `false` when a clear began since `clears`
    /// or the mutation left the queue meanwhile.
    mutating func markShown(
        _ id: String, undo: any CancellationToken, as change: ShownChange? = nil, numberedBefore clears: Int?
    ) -> Bool {
        guard clears.map({ $0 == self.clears }) ?? true else { return false }
        return entries.update(id) { entry in
            entry.undo = undo
            entry.shown = change
            entry.isShown = true
        }
    }

    /// How often mutation `id`'s input was rewritten; `nil` when it left the queue.
    func rewrites(of id: String) -> Int? {
        entries[id]?.rewrites
    }

    /// The mutation `id` as it stands now, if it is in the queue.
    func record(_ id: String) -> StoredMutation<Input>? {
        entries[id]?.record
    }

    /// The mutations naming the item `id`, in queue order, as they stand now.
    func records(naming id: String) -> [StoredMutation<Input>] {
        items.mutations(naming: id).compactMap { entries[$0]?.record }.sorted { $0.sequence < $1.sequence }
    }

    // MARK: Server ids

    /// The server answered attempt `serial`, the creation of temporary id `temporary`, with `server`: the id is
    /// recorded with the creation and known from now on (an input added later is rewritten first). Returns the
    /// creation and the mutations after it, to rewrite, and `saves` entered once, for the caller's saves; `nil` when
    /// the attempt was taken back meanwhile.
    mutating func beginAssigning(
        _ server: String, to temporary: String, serial: Int
    ) -> (creation: Entry, later: [StoredMutation<Input>], saves: DispatchGroup)? {
        guard let id = sending.id(of: serial) else { return nil }
        var creation: Entry?
        entries.update(id) { entry in
            entry.record.serverID = server
            creation = entry
        }
        guard let creation else { return nil }
        items.assign(server, to: temporary)
        saves.enter()
        let later = records(naming: temporary).filter { $0.id != id }
        return (creation, later, saves)
    }

    /// Keeps `changes` (rewritten with an id the server gave) to show with the confirmation of creation `id`, and the
    /// store's changes made before the id was known.
    mutating func showOnAccept(_ changes: [(shown: ShownChange, input: Input)], shownUpTo: Int, of id: String) {
        entries.update(id) { entry in
            entry.replacedOnAccept = changes
            entry.shownUpToOnAccept = shownUpTo
        }
    }

    /// Takes the changes kept to show with the confirmation of creation `id`, with the creation and the store's
    /// changes made before its id was known.
    mutating func takeShownOnAccept(
        of id: String
    ) -> (changes: [(shown: ShownChange, input: Input)], creation: StoredMutation<Input>?, shownUpTo: Int) {
        var taken: (changes: [(shown: ShownChange, input: Input)], creation: StoredMutation<Input>?, shownUpTo: Int) =
            ([], nil, 0)
        entries.update(id) { entry in
            taken = (exchange(&entry.replacedOnAccept, with: []), entry.record, entry.shownUpToOnAccept)
        }
        return taken
    }

    /// Rewrites the inputs of the mutations `rewritten` names (those still in the queue), which name `server` from
    /// now on instead of `temporary`; returns them as they stand now, with their changes in the store.
    mutating func rewrite(
        _ rewritten: [(id: String, input: Input)], replacing temporary: String, with server: String
    ) -> [(record: StoredMutation<Input>, shown: ShownChange?)] {
        rewritten.compactMap { id, input in
            var result: (StoredMutation<Input>, ShownChange?)?
            entries.update(id) { entry in
                entry.record.input = input
                entry.rewrites += 1
                entry.names = entry.names.map { $0 == temporary ? server : $0 }
                result = (entry.record, entry.shown)
            }
            guard result != nil else { return nil }
            items.rename(id, from: temporary, to: server)
            return result
        }
    }

    /// Keeps the store's commit of mutation `id`, which the server's answer completes.
    mutating func keepCommit(_ commit: @escaping LoadCompletion<Void>, of id: String) {
        entries.update(id) { $0.commit = commit }
    }

    /// The store no longer waits for mutation `id`'s commit: returns its attempt in flight, to end, and the commit, to
    /// release after unlocking.
    mutating func commitCancelled(_ id: String) -> (attempt: Attempt?, commit: LoadCompletion<Void>?) {
        var commit: LoadCompletion<Void>?
        entries.update(id) { commit = $0.commit.take() }
        return (sending.take(sending: id), commit)
    }

    /// Takes mutation `id` out, with its attempt in flight and, when it was first, the wait for its retry.
    mutating func remove(_ id: String) -> (entry: Entry?, attempt: Attempt?, retry: (any CancellationToken)?) {
        let attempt = sending.take(sending: id)
        guard let (entry, wasFirst) = takeOut(id) else { return (nil, attempt, nil) }
        guard wasFirst else { return (entry, attempt, nil) }
        return (entry, attempt, sending.endWaitToRetry())
    }

    // MARK: Attempts

    /// Begins an attempt of the first mutation when nothing is sent, no retry is waited for, no clear is under way,
    /// and its commit is there. `byBudget`: asked by a call sending within a budget, which alone starts attempts while
    /// it runs.
    mutating func beginAttempt(byBudget: Bool) -> Start {
        switch sending.gate(byBudget: byBudget) {
        case .heldForBudget: return .heldForBudget
        case .closed: return .none
        case .open: break
        }
        // A conflict waiting for the app holds the queue: nothing after it is sent.
        var record: StoredMutation<Input>?
        // Looked at in place: only its record is copied.
        let first = entries.updateFirst { entry in
            if entry.commit != nil, !entry.isConflicted { record = entry.record }
        }
        guard let id = first, let record else { return .none }
        let serial = sending.begin(id)
        // Recording the attempt is a save a clear waits for.
        saves.enter()
        return .attempt(record, serial: serial, saves: saves)
    }

    /// Records that attempt `serial` is under way with `attempts` counted and `lease` held; `false` when it was taken
    /// back meanwhile.
    mutating func recordAttempt(_ serial: Int, attempts: Int, lease: MutationSendingLease?) -> Bool {
        guard let id = sending.id(of: serial) else { return false }
        let isThere = entries.update(id) { entry in
            entry.status = .sending
            entry.record.attempts = attempts
        }
        if isThere { sending.keepLease(lease, of: serial) }
        return isThere
    }

    /// Keeps the token of attempt `serial`'s load; `false` when it was answered or taken back meanwhile.
    mutating func keepToken(_ token: any CancellationToken, of serial: Int) -> Bool {
        sending.keepToken(token, of: serial)
    }

    /// The server answered attempt `serial`: takes it out with the commit to complete.
    mutating func answer(_ serial: Int) -> (Attempt, LoadCompletion<Void>?)? {
        guard let attempt = sending.take(serial) else { return nil }
        var commit: LoadCompletion<Void>?
        entries.update(attempt.id) { commit = $0.commit.take() }
        return (attempt, commit)
    }

    /// The server accepted attempt `serial`: takes out the commit to complete (`nil` when the attempt was taken back).
    /// The attempt stays under way, its lease held and nothing else sent, until the store settled the change.
    mutating func accept(_ serial: Int) -> LoadCompletion<Void>? {
        guard let id = sending.id(of: serial) else { return nil }
        var commit: LoadCompletion<Void>?
        entries.update(id) { commit = $0.commit.take() }
        return commit
    }

    /// Attempt `serial` failed for now: its mutation stays first and waits for its retry. Returns the attempt and the
    /// mutation's attempts, for the delay.
    mutating func failForNow(_ serial: Int, with error: any Error) -> (Attempt, attempts: Int)? {
        guard let attempt = sending.take(serial) else { return nil }
        var attempts = 0
        let isThere = entries.update(attempt.id) { entry in
            entry.status = .waiting
            entry.lastError = error
            attempts = entry.record.attempts
        }
        guard isThere else { return nil }
        sending.waitToRetry()
        return (attempt, attempts)
    }

    // MARK: Conflicts

    /// The server answered attempt `serial` with a conflict (`error`): the attempt ends, and its mutation stays first,
    /// conflicted, holding the queue until it is resolved. Returns the attempt (its lease to release), the mutation
    /// and its change in the store; `nil` when the attempt was taken back meanwhile.
    mutating func conflict(
        _ serial: Int, with error: any Error, serverCopy: any Sendable
    ) -> (attempt: Attempt, record: StoredMutation<Input>, shown: ShownChange?)? {
        guard let attempt = sending.take(serial) else { return nil }
        var found: (StoredMutation<Input>, ShownChange?)?
        entries.update(attempt.id) { entry in
            entry.status = .waiting
            entry.isConflicted = true
            entry.serverCopy = serverCopy
            entry.lastError = error
            found = (entry.record, entry.shown)
        }
        guard let (record, shown) = found else { return nil }
        return (attempt, record, shown)
    }

    /// Conflicted mutation `id` is sent again (a rebase, or a merge with `input`): it waits for its turn, counted as
    /// one more resend (an idempotency key of its own). Returns it as it stands, to save (counted among the saves
    /// under way: the caller leaves `saves` once it is written), with its change in the store; `nil` when it is not
    /// conflicted.
    mutating func resend(
        _ id: String, input: Input?
    ) -> (record: StoredMutation<Input>, shown: ShownChange?, saves: DispatchGroup)? {
        guard entries[id]?.isConflicted == true else { return nil }
        var found: (StoredMutation<Input>, ShownChange?)?
        entries.update(id) { entry in
            entry.isConflicted = false
            entry.serverCopy = nil
            entry.lastError = nil
            entry.record.resends += 1
            entry.record.awaitsResolution = false
            if let input {
                entry.record.input = input
                entry.rewrites += 1
            }
            found = (entry.record, entry.shown)
        }
        guard let (record, shown) = found else { return nil }
        saves.enter()
        return (record, shown, saves)
    }

    /// Conflicted mutation `id` as it stands, with the server's copy its conflict came with in this launch; `nil` when
    /// it is not conflicted.
    func conflicted(_ id: String) -> (record: StoredMutation<Input>, serverCopy: (any Sendable)?)? {
        guard let entry = entries[id], entry.isConflicted else { return nil }
        return (entry.record, entry.serverCopy)
    }

    /// Conflicted mutation `id` waits for the app's answer, across restarts: returns it as it stands, to save
    /// (counted among the saves under way); `nil` when it is not conflicted.
    mutating func awaitResolution(_ id: String) -> (record: StoredMutation<Input>, saves: DispatchGroup)? {
        guard entries[id]?.isConflicted == true else { return nil }
        var record: StoredMutation<Input>?
        entries.update(id) { entry in
            entry.record.awaitsResolution = true
            record = entry.record
        }
        guard let record else { return nil }
        saves.enter()
        return (record, saves)
    }

    /// Conflicted mutation `id` gives way to the server's copy: takes out the store's commit, which the caller fails
    /// (the store then undoes the change and settles it; without its commit it is not sent meanwhile). `nil` when it
    /// is not conflicted.
    mutating func giveWay(_ id: String) -> (record: StoredMutation<Input>, commit: LoadCompletion<Void>?)? {
        guard let entry = entries[id], entry.isConflicted else { return nil }
        var commit: LoadCompletion<Void>?
        entries.update(id) { entry in
            entry.isConflicted = false
            commit = entry.commit.take()
        }
        return (entry.record, commit)
    }

    /// Another process sends from the storage now: attempt `serial` did not begin, and the queue waits a moment.
    mutating func yieldToAnotherProcess(_ serial: Int) -> Bool {
        guard sending.take(serial) != nil else { return false }
        sending.waitToRetry()
        return true
    }

    /// The mutations shown and not being sent by this process: those another process may have sent since.
    var shownAndWaiting: [StoredMutation<Input>] {
        entries.inOrder.filter { $0.isShown && !sending.isSending($0.record.id) }.map(\.record)
    }

    /// Another process sent mutation `id` (the storage no longer keeps it): takes it out, with the wait for its retry
    /// when it was first; `nil` when it left already or this process sends it now.
    mutating func sentElsewhere(id: String) -> (entry: Entry, retry: (any CancellationToken)?)? {
        guard !sending.isSending(id), let (entry, wasFirst) = takeOut(id) else { return nil }
        return (entry, wasFirst ? sending.endWaitToRetry() : nil)
    }

    /// Another process sent the mutation of attempt `serial` already: takes it out.
    mutating func sentElsewhere(_ serial: Int) -> Entry? {
        guard let attempt = sending.take(serial) else { return nil }
        return takeOut(attempt.id)?.entry
    }

    /// Takes back the attempt in flight, its mutation first and waiting again.
    mutating func takeBackAttempt() -> Attempt? {
        guard let attempt = sending.takeAttempt() else { return nil }
        entries.update(attempt.id) { $0.status = .waiting }
        return attempt
    }

    // MARK: Retries

    /// Keeps the timer of the retry waited for; `false` when the wait ended meanwhile (the network came back).
    mutating func keepRetry(_ timer: any CancellationToken) -> Bool {
        sending.keepRetry(timer)
    }

    /// Ends the wait for a retry (it is due, or the network came back): returns its timer, to cancel.
    mutating func endWaitToRetry() -> (any CancellationToken)? {
        sending.endWaitToRetry()
    }

    // MARK: Sending within a budget

    /// A call sending within a budget begins.
    mutating func beginBudget(_ watcher: any BudgetWatcher) {
        sending.beginBudget(watcher)
    }

    /// For a call sending within a budget: `nil` when no mutation is left, `true` when it starts the first (with the
    /// retry timer it replaces, to cancel), `false` when an attempt runs already.
    mutating func nextStepWithinBudget() -> (starts: Bool?, retry: (any CancellationToken)?) {
        guard entries.firstID() != nil else { return (nil, nil) }
        let step = sending.nextStepWithinBudget()
        return (step.starts, step.retry)
    }

    /// A call sending within a budget ends; the mutations left, and whether the queue now waits its first retry delay
    /// before sending on its own (it does when the others stopped, online, with mutations left).
    mutating func endBudget(
        _ watcher: any BudgetWatcher, isOnline: Bool
    ) -> (remaining: [PendingMutation<Input>], waits: Bool) {
        let waits = sending.endBudget(watcher, isOnline: isOnline, hasMutations: !entries.isEmpty)
        return (list, waits)
    }

    // MARK: Clears

    /// A clear begins: nothing is sent until it ends, and every mutation is taken out.
    mutating func beginClear() -> ClearTaken {
        clears += 1
        let (attempt, retry) = sending.beginClear()
        items.removeAll()
        return ClearTaken(
            entries: entries.removeAll(), attempt: attempt, retry: retry,
            saves: exchange(&saves, with: DispatchGroup()))
    }

    /// Keeps the shown mutations a clear took, to tell once it ends.
    mutating func keepCleared(_ taken: [Entry]) {
        cleared += taken.filter(\.isShown)
    }

    /// A clear ends: returns the shown mutations it took.
    mutating func endClear() -> [Entry] {
        sending.endClear()
        return exchange(&cleared, with: [])
    }
}
