/// What a ``Store`` promises, written as plainly as it can be: a sequential description of the documented semantics,
/// with no locks, no threads and no performance, for a store of two levels (a memory level and a disk level, both
/// answering at once) and a network whose answers the history gives.
///
/// Per key it keeps the confirmed value with its age and whether it is stale, the pending optimistic changes in order,
/// the fetches in flight, and whether the store holds the key at all (the levels hold the rest); per level, what it
/// holds. Every operation of the history changes it as the docs say, and says what each caller is answered.
///
/// Where the docs were vague, this is what they now say:
/// - The store holds a key while it is in use (observed, fetched, changed, a change pending, a value no level could
///   save), and then keeps its value among the last ones to fall out of use (a history's two keys always fit), unless
///   told to keep none: then only the levels hold its value, and an observer that arrives is shown nothing until
///   something reads or changes the key.
/// - A fetch confirms its value unless the key was removed or the store cleared since it started, or a fetch started
///   after it was confirmed first; changes confirmed while it was in flight are applied again to what it brings.
/// - Staleness is the key's own: a fetch sent after the invalidation, a write, an update or a confirmed change make it
///   fresh; a value read from the levels is as stale as the key was when it was saved there.
/// - Offline, a store that waits for the network keeps each fetch waiting and sends their requests once it is back, in
///   the order the fetches began: a fetch is fresh against the invalidations made before its request went out. A
///   store that answers from its cache fails each fetch at once, with no request. Neither revalidates offline.
struct StoreModel: ModelCheck.System, Hashable {
    /// A caller waiting for a fetch.
    enum Caller: Hashable {
        case read(Int, ModelPolicy)
        case refresh(Int)
        /// A refetch for the observers (an invalidation, a revalidation): a failure is attached to what is shown.
        case observers
    }

    struct Fetch: Hashable {
        let id: Int
        /// The request's place among the key's requests; `nil` while it waits for the network.
        var request: Int?
        /// When its request went out, in the model's order of events: what it brings is fresh against the
        /// invalidations before. `nil` while it waits for the network.
        var sent: Int?
        /// Begun, its request not sent yet nor failed for want of the network (see ``StoreModel/defersSends``).
        var awaitsSend = false
        /// Its request could not go out (offline): it fails at a moment of its own, and may be joined until then.
        var failsOffline = false
        /// Its request could not go out (offline) and waits for the network: once it is back, the request goes out
        /// at a moment of its own (see ``StoreModel/defersSends``).
        var waitsOnline = false
        let generation: Int
        let logStart: Int
        var callers: [Caller]
    }

    enum Change: Hashable {
        case set(Items)
        case edit(Edit)

        func applied(to value: Items?) -> Items? {
            switch self {
            case .set(let items): items
            case .edit(let edit): edit.applied(to: value)
            }
        }
    }

    struct PendingEdit: Hashable {
        let mutation: Int
        let edit: Edit
    }

    struct Logged: Hashable {
        let sequence: Int
        let change: Change
    }

    /// What a level holds for a key.
    struct Saved: Hashable {
        let items: Items
        let savedAt: Int
    }

    struct Key: Hashable {
        /// Whether the store holds the key (its entry exists); when not, the levels hold its value.
        var held = false
        /// Whether the store knows the key's confirmed value (read from a level, fetched, written, removed).
        var known = false
        var value: Items?
        /// When the confirmed value was saved, on the model's clock.
        var savedAt = 0
        var stale = false
        /// When the key was last made stale, in the model's order of events.
        var staleMark = 0
        var pending: [PendingEdit] = []
        var observers: Set<Int> = []
        var fetches: [Fetch] = []
        var lastConfirmedFetch = 0
        var generation = 0
        var log: [Logged] = []
        var logSequence = 0
        var owesRefetch = false
        /// The generation in which the fetch owed to the observers is due, when it begins apart from the fetch that
        /// ended before it (see ``StoreModel/defersOwedRefetches``).
        var refetchDue: Int?
        /// The confirmed value (or its removal) could be saved by no level: the store keeps it, and takes nothing from
        /// the levels, which are behind.
        var unsaved = false
        /// How many requests the key made.
        var requests = 0

        var isInUse: Bool { !observers.isEmpty || !pending.isEmpty || !fetches.isEmpty || unsaved }

        /// What the key shows: the confirmed value with the pending changes applied in order; `nil` when it shows
        /// nothing.
        var shown: Shown? {
            guard held, (known && value != nil) || !pending.isEmpty else { return nil }
            let base = known ? value : nil
            return Shown(value: pending.reduce(base) { $1.edit.applied(to: $0) }, hasPendingChanges: !pending.isEmpty)
        }
    }

    private(set) var keys: [String: Key] = [:]
    /// What fetches do while the network cannot be reached, and whether it can be now.
    let network: ModelNetwork
    private(set) var isOnline = true
    /// Whether a fetch owed to the observers waits for ``beginOwedRefetch(_:)`` when the fetch before it ends, rather
    /// than beginning in the same step: a concurrent store begins it a moment later, after other threads' steps.
    var defersOwedRefetches = false
    /// Whether, in a store that watches the connectivity, a fetch sends its request (or fails, or waits, offline) at
    /// a moment of its own after it began (``sendOrFail(_:fetch:)``), rather than as it begins: a concurrent store
    /// begins a fetch under its lock and looks at the connectivity when the fetch's upstream load starts, a moment
    /// later; a fetch that waits sends its request at a moment of its own once the network is back. A read
    /// whose fetch failed then falls back when it answers (``fallBack(read:)``), not as the fetch fails; one whose
    /// fetch a removal or a clear overtook reads what the store shows when it answers, not as the fetch ends.
    var defersSends = false
    /// What each level holds: the value and when it was saved there.
    private(set) var levels: [[String: Saved]] = [[:], [:]]
    private(set) var now = 0
    private var levelsFail = false
    private var counter = 0
    private var mutationKeys: [Int: String] = [:]
    private var mutationCount = 0
    private var readCount = 0
    private var observerCount = 0
    private var observerKeys: [Int: String] = [:]
    /// Whether the store keeps the values of keys no longer in use (its default), rather than none.
    let keepsValues: Bool
    /// The age (seconds) at which both levels expire what they hold (`nil`: never): a level then serves nothing older
    /// (or stamped later than now), and a cache-first read takes no value the store holds that no level would serve.
    let levelMaxAge: Int?

    init(network: ModelNetwork = .always, keepsValues: Bool = true, levelMaxAge: Int? = nil) {
        self.network = network
        self.keepsValues = keepsValues
        self.levelMaxAge = levelMaxAge
    }

    /// What `level` serves of `name` now: nothing once its value expired.
    private func served(_ level: Int, _ name: String) -> Saved? {
        guard let saved = levels[level][name] else { return nil }
        return isHeldByLevels(savedAt: saved.savedAt) ? saved : nil
    }

    /// Whether a value saved at `savedAt` is young enough for the levels to serve it still.
    private func isHeldByLevels(savedAt: Int) -> Bool {
        guard let levelMaxAge else { return true }
        return savedAt <= now && now - savedAt < levelMaxAge
    }

    /// How many times `name` was removed or cleared: a read that began before the last one was overtaken by it.
    func removals(of name: String) -> Int { keys[name]?.generation ?? 0 }

    /// A read that a removal or a clear overtook (it began before it): it answers with what a cache-only read finds
    /// after it, no value when none, never with what it read before.
    mutating func readOvertaken(_ name: String) {
        readCount += 1
        reads[readCount] = []
        hold(name)
        if !(keys[name]!.known && keys[name]!.value != nil) { _ = readLevels(name, .cacheOnly) }
        answer(readCount, shown(name))
    }

    /// How many reads and mutations were made, for a history's operation that names the last.
    var readsMade: Int { readCount }
    var mutationsMade: Int { mutationCount }

    /// What each read, refresh and mutation was answered so far.
    private(set) var reads: [Int: [Answer]] = [:]
    private(set) var mutations: [Int: String] = [:]

    // MARK: Steps

    mutating func apply(_ step: Step) {
        switch step {
        case .write(let key, let items): write(items, for: key)
        case .update(let key, let edit): update(key, edit)
        case .mutate(let key, let edit): mutate(key, edit)
        case .settle(let mutation, let settlement): settle(mutation, settlement)
        case .remove(let key): remove(key)
        case .clear: clear()
        case .invalidate(let key): invalidate([key])
        case .invalidateWhere(let matching): invalidate(matching)
        case .invalidateAll: invalidate(Array(Set(keys.keys).union(levels.flatMap(\.keys))))
        case .revalidate: revalidate()
        case .read(let key, let policy): read(key, policy)
        case .refresh(let key): refresh(key)
        case .observe(let key): observe(key)
        case .stopObserving(let observer): stopObserving(observer)
        case .answer(let key, let request, let items): answer(key, request: request, with: .success(items))
        case .fail(let key, let request): answer(key, request: request, with: .failure(TestError(id: 0)))
        case .updateWhile(let key, let edit, let during):
            // What happens during the change comes after it in the store's order.
            update(key, edit)
            apply(during)
        case .advanceClock(let seconds): now += seconds
        case .levelsFail(let failing): levelsFail = failing
        case .connectivity(let online): connectivity(online)
        }
        for name in Array(keys.keys) { letGoIfUnused(name) }
    }

    /// Lets go of `name` when nothing needs it: the levels hold its value (a value the store keeps stays as it is).
    private mutating func letGoIfUnused(_ name: String) {
        guard let key = keys[name], !key.isInUse else { return }
        if keepsValues, key.held, key.known, key.value != nil { return }
        keys[name]!.held = false
        keys[name]!.known = false
        keys[name]!.value = nil
    }

    /// What the observers, callers and levels are left with now.
    var checkpoint: Checkpoint {
        var checkpoint = Checkpoint()
        for (observer, key) in observerKeys {
            checkpoint.observers[observer] = keys[key]?.shown ?? Shown(value: nil, hasPendingChanges: false)
        }
        checkpoint.reads = reads
        checkpoint.mutations = mutations
        checkpoint.levels = levels.map { $0.mapValues(\.items) }
        checkpoint.requests = keys.compactMapValues { $0.requests == 0 ? nil : $0.requests }
        return checkpoint
    }

    // MARK: Writing

    private mutating func write(_ items: Items, for name: String) {
        hold(name)
        makeFresh(name)
        log(.set(items), for: name)
        confirm(items, for: name, savedAt: now, toLevels: [0, 1])
    }

    private mutating func update(_ name: String, _ edit: Edit) {
        hold(name)
        loadIfUnknown(name)
        let result = edit.applied(to: keys[name]!.value)
        guard keys[name]!.value != nil || result != nil else {
            return log(.edit(edit), for: name)  // nothing to change: a fetch in flight applies it to what it brings
        }
        makeFresh(name)
        log(.edit(edit), for: name)
        confirm(result, for: name, savedAt: now, toLevels: [0, 1])
    }

    private mutating func mutate(_ name: String, _ edit: Edit) {
        mutationCount += 1
        hold(name)
        keys[name]!.pending.append(PendingEdit(mutation: mutationCount, edit: edit))
        mutationKeys[mutationCount] = name
        loadIfUnknown(name)
    }

    private mutating func settle(_ mutation: Int, _ settlement: Settlement) {
        guard let name = mutationKeys[mutation],
            let index = keys[name]?.pending.firstIndex(where: { $0.mutation == mutation })
        else { return }
        let edit = keys[name]!.pending.remove(at: index).edit
        mutationKeys[mutation] = nil
        switch settlement {
        case .accept:
            loadIfUnknown(name)
            makeFresh(name)
            log(.edit(edit), for: name)
            confirm(edit.applied(to: keys[name]!.value), for: name, savedAt: now, toLevels: [0, 1])
            mutations[mutation] = "accepted"
        case .refuse:
            mutations[mutation] = "refused"
        case .cancel:
            break
        }
    }

    private mutating func remove(_ name: String) {
        hold(name)
        counter += 1
        keys[name]!.generation = counter
        keys[name]!.known = true
        keys[name]!.value = nil
        keys[name]!.stale = false
        keys[name]!.staleMark = 0
        keys[name]!.owesRefetch = false
        // A removal no level could make is kept as a save is: the levels are behind until one succeeds.
        keys[name]!.unsaved = levelsFail
        for level in levels.indices where !levelsFail { levels[level][name] = nil }
    }

    private mutating func clear() {
        for name in Array(keys.keys) where keys[name]!.held {
            for pending in keys[name]!.pending {
                mutations[pending.mutation] = "cleared"
                mutationKeys[pending.mutation] = nil
            }
            counter += 1
            keys[name]!.pending = []
            keys[name]!.generation = counter
            keys[name]!.known = true
            keys[name]!.value = nil
            keys[name]!.stale = false
            keys[name]!.staleMark = 0
            keys[name]!.owesRefetch = false
            keys[name]!.unsaved = false
        }
        // The levels are emptied: nothing they held is stale any more, and nothing saved after is.
        for name in Array(keys.keys) where !keys[name]!.held { keys[name]!.stale = false }
        levels = levels.map { _ in [:] }  // emptying a level never fails here
    }

    // MARK: Freshness

    private mutating func invalidate(_ names: [String]) {
        for name in markStale(names).sorted() { refetch(name) }
    }

    /// Marks `names` stale; returns the observed ones, which the store then refetches (``refetch(_:)``).
    mutating func markStale(_ names: [String]) -> [String] {
        counter += 1
        var observed: [String] = []
        for name in names {
            if keys[name] == nil { keys[name] = Key() }
            keys[name]!.stale = true
            keys[name]!.staleMark = counter
            if !keys[name]!.observers.isEmpty { observed.append(name) }
        }
        return observed
    }

    private mutating func revalidate() {
        // Nothing while the network cannot be reached.
        guard isOnline || network == .always else { return }
        // The store has no maximum age: every observed key without a fetch in flight is fetched anew.
        for name in keys.keys.sorted() where !keys[name]!.observers.isEmpty && keys[name]!.fetches.isEmpty {
            refetch(name)
        }
    }

    /// One fetch in flight for the observers, and at most one more owed.
    mutating func refetch(_ name: String) {
        let key = keys[name]!
        guard !key.fetches.isEmpty else { return beginFetch(name, for: .observers, joining: false) }
        if !key.fetches.contains(where: { ($0.sent ?? .max) > key.staleMark }) { keys[name]!.owesRefetch = true }
    }

    /// The key is fresh: not stale, and a fetch owed for an invalidation is not needed any more.
    private mutating func makeFresh(_ name: String) {
        keys[name]!.stale = false
        keys[name]!.staleMark = 0
        keys[name]!.owesRefetch = false
    }

    // MARK: Reading

    private mutating func read(_ name: String, _ policy: ModelPolicy) {
        readCount += 1
        let read = readCount
        reads[read] = []
        hold(name)
        let key = keys[name]!
        let held = key.known && key.value != nil
        switch policy {
        case .cacheFirst, .cacheFirstYoungerThan:
            if held, takes(key.savedAt, stale: key.stale, policy), isHeldByLevels(savedAt: key.savedAt) {
                return answer(read, shown(name))
            }
            if readLevels(name, policy) { return answer(read, shown(name)) }
            beginFetch(name, for: .read(read, policy), joining: true)
        case .cacheOnly:
            if held || readLevels(name, policy) { return answer(read, shown(name)) }
            reads[read]!.append(.failed)
        case .cacheThenNetwork:
            if held || readLevels(name, policy) { answer(read, shown(name)) }
            beginFetch(name, for: .read(read, policy), joining: true)
        case .networkFirst, .networkOnly:
            beginFetch(name, for: .read(read, policy), joining: true)
        }
    }

    private mutating func refresh(_ name: String) {
        readCount += 1
        reads[readCount] = []
        hold(name)
        beginFetch(name, for: .refresh(readCount), joining: false)
    }

    private mutating func observe(_ name: String) {
        observerCount += 1
        hold(name)
        keys[name]!.observers.insert(observerCount)
        observerKeys[observerCount] = name
    }

    private mutating func stopObserving(_ observer: Int) {
        guard let name = observerKeys.removeValue(forKey: observer) else { return }
        keys[name]!.observers.remove(observer)
    }

    /// Whether a read under `policy` takes a value saved at `savedAt`.
    private func takes(_ savedAt: Int, stale: Bool, _ policy: ModelPolicy) -> Bool {
        switch policy {
        case .cacheFirst: !stale
        case .cacheFirstYoungerThan(let seconds): !stale && savedAt <= now && now - savedAt < seconds
        case .cacheOnly, .cacheThenNetwork, .networkFirst, .networkOnly: true
        }
    }

    /// Reads the levels in order for `policy`; a value it takes is confirmed (and saved to the faster levels).
    private mutating func readLevels(_ name: String, _ policy: ModelPolicy, error: Bool = false) -> Bool {
        // Levels that could not save what the store confirmed hold something older: nothing is taken from them.
        guard !keys[name]!.unsaved else { return false }
        for level in levels.indices {
            guard let saved = served(level, name) else { continue }
            let (items, savedAt) = (saved.items, saved.savedAt)
            let stale = keys[name]!.stale
            guard takes(savedAt, stale: stale, policy) else { continue }
            confirm(items, for: name, savedAt: savedAt, toLevels: Array(0..<level))
            return true
        }
        return false
    }

    /// The key's value from the levels (any, fresh or not), for a change of a key the store does not know.
    private mutating func loadIfUnknown(_ name: String) {
        guard !keys[name]!.known else { return }
        keys[name]!.known = true
        keys[name]!.value = nil
        guard let saved = levels.indices.compactMap({ served($0, name) }).first else { return }
        keys[name]!.value = saved.items
        keys[name]!.savedAt = saved.savedAt
    }

    // MARK: Fetching

    private mutating func beginFetch(_ name: String, for caller: Caller, joining: Bool) {
        if joining, let last = keys[name]!.fetches.last, last.generation == keys[name]!.generation {
            keys[name]!.fetches[keys[name]!.fetches.count - 1].callers.append(caller)
            return
        }
        counter += 1
        let key = keys[name]!
        let logStart = min(
            key.fetches.filter { $0.generation == key.generation }.map(\.logStart).min() ?? .max, key.logSequence)
        keys[name]!.fetches.append(
            Fetch(
                id: counter, request: nil, sent: nil, generation: key.generation, logStart: logStart,
                callers: [caller]))
        guard !defersSends || network == .always else {
            keys[name]!.fetches[keys[name]!.fetches.count - 1].awaitsSend = true
            return
        }
        guard isOnline || network == .always else {
            // Offline: the fetch waits for the network, or fails at once without a request.
            if network == .answersFromCache {
                end(name, fetch: keys[name]!.fetches.count - 1, with: .failure(.offline))
            }
            return
        }
        send(name, fetch: keys[name]!.fetches.count - 1)
    }

    /// The fetches begun whose request is not sent yet (see ``defersSends``), by key and id.
    var sendsDue: [(name: String, fetch: Int)] { fetches { $0.awaitsSend || ($0.waitsOnline && isOnline) } }

    /// The fetches whose request could not go out and that have not failed yet (see ``defersSends``), by key and id.
    var failuresDue: [(name: String, fetch: Int)] { fetches(where: \.failsOffline) }

    /// The fetches in flight that `isIncluded`, by key (in order) and id.
    private func fetches(where isIncluded: (Fetch) -> Bool) -> [(name: String, fetch: Int)] {
        keys.keys.sorted().flatMap { name in keys[name]!.fetches.filter(isIncluded).map { (name, $0.id) } }
    }

    /// Fetch `id` of `name`, whose request could not go out, fails now.
    mutating func failOffline(_ name: String, fetch id: Int) {
        guard let index = keys[name]?.fetches.firstIndex(where: { $0.id == id }) else { return }
        end(name, fetch: index, with: .failure(.offline))
    }

    /// Fetch `id` of `name` sends its request now, or finds the network cannot be reached: it then fails at a moment
    /// of its own (``failOffline(_:fetch:)``), or waits for the network (``sendsDue``); the request's number when it
    /// was sent.
    mutating func sendOrFail(_ name: String, fetch id: Int) -> Int? {
        guard let index = keys[name]?.fetches.firstIndex(where: { $0.id == id }) else { return nil }
        keys[name]!.fetches[index].awaitsSend = false
        keys[name]!.fetches[index].waitsOnline = false
        guard isOnline else {
            if network == .waitsForNetwork {
                keys[name]!.fetches[index].waitsOnline = true
            } else {
                keys[name]!.fetches[index].failsOffline = true
            }
            return nil
        }
        send(name, fetch: index)
        return keys[name]!.fetches[index].request
    }

    /// The request of `name`'s fetch at `index` goes out now.
    private mutating func send(_ name: String, fetch index: Int) {
        counter += 1
        keys[name]!.fetches[index].sent = counter
        keys[name]!.fetches[index].request = keys[name]!.requests
        keys[name]!.requests += 1
    }

    /// The network can be reached again, or no longer: the fetches waiting for it send their requests, in the order
    /// they began.
    private mutating func connectivity(_ online: Bool) {
        isOnline = online
        // A concurrent store sends each request a moment after the network is back (see ``sendsDue``).
        guard online, network == .waitsForNetwork, !defersSends else { return }
        var waiting: [(id: Int, name: String)] = []
        for (name, key) in keys {
            for fetch in key.fetches where fetch.request == nil { waiting.append((fetch.id, name)) }
        }
        for (id, name) in waiting.sorted(by: { $0.id < $1.id }) {
            send(name, fetch: keys[name]!.fetches.firstIndex { $0.id == id }!)
        }
    }

    /// How many requests `name` made.
    func requestsMade(for name: String) -> Int { keys[name]?.requests ?? 0 }

    /// The network answers request `request` of `name` with `items`: what a concurrent history's network, which
    /// answers at once, does within the operation that sent it.
    mutating func answerAtOnce(_ name: String, request: Int, with items: Items) {
        answer(name, request: request, with: .success(items))
    }

    private mutating func answer(_ name: String, request: Int, with result: Result<Items, TestError>) {
        guard let index = keys[name]?.fetches.firstIndex(where: { $0.request == request }) else { return }
        end(name, fetch: index, with: result)
    }

    /// `name`'s fetch at `index` ends with `result`.
    private mutating func end(_ name: String, fetch index: Int, with result: Result<Items, TestError>) {
        let fetch = keys[name]!.fetches.remove(at: index)
        let rebased = keys[name]!.log.filter { $0.sequence > fetch.logStart }.map(\.change)
        trimLog(name)
        switch result {
        case .success(let items):
            if fetch.generation != keys[name]!.generation {
                // Removed or cleared since it started: it confirms nothing.
                for caller in fetch.callers { fetched(caller, name, discarded: true) }
            } else if fetch.id <= keys[name]!.lastConfirmedFetch {
                for caller in fetch.callers { fetched(caller, name, discarded: false) }
            } else {
                keys[name]!.lastConfirmedFetch = fetch.id
                if let sent = fetch.sent, sent > keys[name]!.staleMark { makeFresh(name) }
                let value = rebased.reduce(Optional(items)) { $1.applied(to: $0) }
                confirm(value, for: name, savedAt: now, toLevels: [0, 1])
                for caller in fetch.callers { fetched(caller, name, discarded: false) }
            }
        case .failure:
            for caller in fetch.callers { failed(caller, name) }
        }
        takeOwedRefetch(name)
    }

    private mutating func fetched(_ caller: Caller, _ name: String, discarded: Bool) {
        switch caller {
        case .read(let read, _) where discarded && defersSends:
            // A concurrent store reads what it shows a moment later, when the read answers.
            overtakenReads[read] = name
        case .read(let read, _) where discarded:
            answerOvertaken(read, name)
        case .read(let read, _): answer(read, shown(name))
        case .refresh(let read):
            if discarded { reads[read]!.append(.failed) } else { answer(read, shown(name)) }
        case .observers: break
        }
    }

    private mutating func failed(_ caller: Caller, _ name: String) {
        switch caller {
        case .refresh(let read):
            reads[read]!.append(.failed)
        case .observers:
            break  // the error is attached to what is shown
        case .read(let read, let policy) where defersSends:
            // A concurrent store falls back a moment later (after the changes asked before, and a level read).
            fallbacks[read] = Fallback(name: name, policy: policy)
        case .read(let read, let policy):
            fallBack(read, policy, name)
        }
    }

    /// What a read whose fetch failed answers: the value shown with the error (unless it asked for the network
    /// first), else the levels' value with the error, else the failure.
    private mutating func fallBack(_ read: Int, _ policy: ModelPolicy, _ name: String) {
        // The key its fetch no longer needs is let go of first (the levels then answer, as they judge their values'
        // age).
        letGoIfUnused(name)
        hold(name)
        let showsSomething = keys[name]!.shown != nil
        if policy != .networkFirst, showsSomething { return answer(read, shown(name), withError: true) }
        // The levels, any value, shown with the error.
        if readLevels(name, .cacheOnly) { return answer(read, shown(name), withError: true) }
        if keys[name]!.shown != nil { return answer(read, shown(name), withError: true) }
        if reads[read]!.isEmpty { reads[read]!.append(.failed) }
    }

    /// A read whose fetch failed, falling back (see ``defersSends``).
    struct Fallback: Hashable {
        let name: String
        let policy: ModelPolicy
    }

    /// The reads whose fetch failed and that have not fallen back yet, by read.
    private var fallbacks: [Int: Fallback] = [:]

    /// The reads whose fetch a removal or a clear overtook and that have not answered yet, by read.
    private var overtakenReads: [Int: String] = [:]

    /// A read overtaken by a removal or a clear answers with what a cache-only read finds after it: the key its fetch
    /// no longer needs is let go of first (the levels then answer, as they judge their values' age).
    private mutating func answerOvertaken(_ read: Int, _ name: String) {
        letGoIfUnused(name)
        hold(name)
        let key = keys[name]!
        if !(key.known && key.value != nil) { _ = readLevels(name, .cacheOnly) }
        answer(read, shown(name))
    }

    /// Read `read` answers now, if its fetch failed (it falls back) or was overtaken by a removal or a clear (see
    /// ``defersSends``).
    mutating func fallBack(read: Int) {
        if let name = overtakenReads.removeValue(forKey: read) { return answerOvertaken(read, name) }
        guard let fallback = fallbacks.removeValue(forKey: read) else { return }
        fallBack(read, fallback.policy, fallback.name)
    }

    private mutating func takeOwedRefetch(_ name: String) {
        guard keys[name]!.owesRefetch else { return }
        guard keys[name]!.fetches.isEmpty else {
            let staleMark = keys[name]!.staleMark
            keys[name]!.owesRefetch =
                !keys[name]!.observers.isEmpty
                && keys[name]!.fetches.allSatisfy { $0.sent.map { $0 <= staleMark } ?? false }
            return
        }
        keys[name]!.owesRefetch = false
        guard !keys[name]!.observers.isEmpty else { return }
        if defersOwedRefetches {
            keys[name]!.refetchDue = keys[name]!.generation
        } else {
            beginFetch(name, for: .observers, joining: false)
        }
    }

    /// The keys whose owed fetch is due (see ``defersOwedRefetches``).
    var refetchesDue: [String] { keys.keys.filter { keys[$0]!.refetchDue != nil }.sorted() }

    /// Begins the fetch `name` owes its observers, unless it was removed or the store cleared since it was due.
    mutating func beginOwedRefetch(_ name: String) {
        guard let generation = keys[name]?.refetchDue else { return }
        keys[name]!.refetchDue = nil
        if keys[name]!.generation == generation { beginFetch(name, for: .observers, joining: false) }
    }

    // MARK: Bookkeeping

    /// The store holds `name` from now on (until nothing needs it).
    private mutating func hold(_ name: String) {
        if keys[name] == nil { keys[name] = Key() }
        keys[name]!.held = true
    }

    private mutating func log(_ change: Change, for name: String) {
        guard !keys[name]!.fetches.isEmpty else { return }
        keys[name]!.logSequence += 1
        keys[name]!.log.append(Logged(sequence: keys[name]!.logSequence, change: change))
    }

    private mutating func trimLog(_ name: String) {
        guard let oldest = keys[name]!.fetches.map(\.logStart).min() else {
            keys[name]!.log = []
            return
        }
        keys[name]!.log.removeAll { $0.sequence <= oldest }
    }

    /// Confirms `value` (saved at `savedAt`) and saves it to `levels` (a removal when `nil`).
    private mutating func confirm(_ value: Items?, for name: String, savedAt: Int, toLevels targets: [Int]) {
        keys[name]!.known = true
        keys[name]!.value = value
        keys[name]!.savedAt = savedAt
        guard !targets.isEmpty else { return }
        guard !levelsFail else {
            keys[name]!.unsaved = true
            return
        }
        keys[name]!.unsaved = false
        for level in targets { levels[level][name] = value.map { Saved(items: $0, savedAt: now) } }
    }

    private func shown(_ name: String) -> Shown {
        keys[name]?.shown ?? Shown(value: nil, hasPendingChanges: false)
    }

    /// Answers `read`, unless it was answered already (a read answers once; a cache-then-network read's fetch goes on
    /// after it answered).
    private mutating func answer(_ read: Int, _ shown: Shown, withError: Bool = false) {
        guard reads[read]!.isEmpty else { return }
        reads[read]!.append(.shown(shown, withError: withError))
    }
}

/// The error a model's failing request fails with.
extension TestError {
    static let model = TestError(id: 0)
    /// What a fetch fails with at once while the network cannot be reached (``ModelNetwork/answersFromCache``).
    static let offline = TestError(id: 1)
}

/// What a modelled store's fetches do while the network cannot be reached (its `NetworkMode`).
enum ModelNetwork: Hashable, Sendable, CustomStringConvertible {
    /// They start anyway (no connectivity is watched).
    case always
    /// They wait, and send their requests once the network is back.
    case waitsForNetwork
    /// They fail at once, without a request.
    case answersFromCache

    var description: String {
        switch self {
        case .always: ".always"
        case .waitsForNetwork: ".waitsForNetwork"
        case .answersFromCache: ".answersFromCache"
        }
    }
}
