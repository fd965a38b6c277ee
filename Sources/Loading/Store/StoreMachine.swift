#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a ``Store`` knows of its keys, and what must happen when something happens to one: a value with no lock, no
/// clock and no closure it runs. Each event is a method call (with the time it happened, where that matters); each
/// returns the actions the store performs after unlocking, in order (``Effects``). The store holds the machine
/// behind one lock and does nothing else under it.
///
/// ## Invariants
/// - **One entry per key in use.** An entry exists while something needs it: an observer, a level read, a fetch, a
///   pending optimistic change, a queued change, a level operation not yet issued, a debounced write. Then it is
///   dropped (or kept among the last `keptValues` values), and the levels hold the key's value.
/// - **Known or not.** An entry's `confirmed` value is the truth only when `isKnown`; otherwise the levels hold it
///   and the store reads them. An entry that is not known has no level operation pending: level operations come only
///   from confirmed changes, which make it known.
/// - **A generation** is a store-wide number an entry takes when it is made and anew on every removal and clear.
///   Whatever started under an older generation (a fetch, a level read, a change being computed) is stale when it
///   ends: it confirms nothing.
/// - **Confirmed versions** count the changes of an entry's confirmed value: a level read confirms its hit only if
///   the value did not change while it ran.
/// - **Versions** number what observers are shown, store-wide and only growing: an observer never takes an older
///   response after a newer one, even across entries that were dropped and made again.
/// - **Per key, one change at a time.** Every change of a confirmed value (a write, an update, a fetched value, a
///   level hit, a settled optimistic change) goes through its key's queue: the caller that finds the queue idle runs
///   it, and the changes queued meanwhile, in order. Removals and clears act at once and make what is queued or
///   running stale.
/// - **Per key, level operations in decision order.** They are issued by one caller at a time, in the order the
///   changes that decided them were made; a clear's `removeAll` is issued after every operation decided before it and
///   before any decided after it. Levels are not read while a change of the key runs; a level whose writes for the
///   key are not issued yet may be read, but its hit is older than the confirmed value and counts as a miss.
/// - **Last asked wins.** A fetch's value is confirmed only if no fetch started after it was confirmed first; changes
///   made while it was in flight are applied again to its value.
/// - **Stale marks.** An invalidation marks the entries it matches with a counter value (`staleMark`): a fetch
///   started after it (a greater id) or a write makes the value fresh again; an older fetch does not. Keys the store
///   does not hold are judged by the invalidation records (dates, and predicates evaluated outside the lock): a
///   level's value saved at or before a matching record is stale. Records beyond a limit fold into one date before
///   which everything is stale: more is refetched, never less. A level read holds its key's entry, so an
///   invalidation made while it runs marks that entry when it matches the key: the hit is stale by the records made
///   before the read or by a mark made during it, and an invalidation of other keys leaves it fresh.
/// - **Saved by intent.** Writes and updates (bursts of live changes) reach a debounced level when its timer fires or
///   a flush asks; a fetched value, a level's hit and a confirmed optimistic change are written to every level at
///   once, replacing a debounced write waiting. A fetch's callers and a confirmed change's completion are answered
///   once those writes have completed (or were dropped by a clear): their ``SaveTicket``.
@usableFromInline
struct StoreMachine<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Change = @Sendable (Value?) -> Value?
    @usableFromInline typealias FetchCompletion = @Sendable (Result<Snapshot, any Error>) -> Void
    @usableFromInline typealias HitReply = @Sendable (Snapshot) -> Void
    @usableFromInline typealias Subject = CurrentValueStreamSubject<StoreResponse<Value>?, Never>

    @usableFromInline var entries: [Key: Entry] = [:]
    @usableFromInline let levelNames: [String]
    @usableFromInline let debouncedLevels: Set<Int>
    @usableFromInline let keptValues: Int
    /// Keys that fell out of use with a value, oldest first; a record whose stamp is no longer its entry's is stale.
    @usableFromInline var kept: [KeptRecord] = []
    @usableFromInline var keptHead = 0
    /// Entries with a `keptStamp`.
    @usableFromInline var keptCount = 0
    @usableFromInline var counter = 0
    /// How many times the store was cleared: a change made for what was shown before a clear is refused after it.
    @usableFromInline var clears = 0
    /// The `removeAll` of a clear, waiting for the level operations being issued to be issued.
    @usableFromInline var clearing: Clearing?
    /// Keys whose callers are issuing level operations now.
    @usableFromInline var issuing = 0
    /// Keys whose level operations wait for a clear's `removeAll` to be issued.
    @usableFromInline var held: [Key] = []
    /// Invalidations, oldest first, for judging what the levels hold (see ``StaleRules``).
    @usableFromInline var invalidations: [Invalidation] = []
    /// Every value saved at or before this point is stale: an invalidation of every key, or old records folded.
    @usableFromInline var staleBefore: StaleBefore?
    /// The latest date a level stamped a value of this store's with (a save landed) or was read with: invalidations
    /// are dated no earlier (see ``stamped(_:)``).
    @usableFromInline var latestStamp: Date?
    /// While invalidations are recorded: the keys the store confirmed a fresh value of since, each with the point in
    /// the store's order it was fresh from (a fetch's sending, a write), so that an invalidation older than it does
    /// not judge the level's copy stale, whatever its date. At most ``refreshedLimit``, the oldest forgotten first
    /// (such a key is judged by its date again: more is refetched, never less).
    @usableFromInline var refreshed: [Key: Int] = [:]
    @usableFromInline var refreshedOrder: [KeptRecord] = []
    @usableFromInline var refreshedHead = 0
    /// How many refreshed keys are remembered.
    @usableFromInline static var refreshedLimit: Int { 4_096 }
    /// What the machine let go of: dropped entries and a replaced shared response. Releasing them can run a value's
    /// deinitializer (the caller's code), so the store takes them with ``takeReleased()`` and releases them after
    /// unlocking.
    @usableFromInline var released = StoreReleased()
    /// The entry ``entry(_:)`` found last, with its key; forgotten when the entry is dropped.
    @usableFromInline var recent: Entry?
    /// How many invalidation records are kept before the oldest fold into `staleBefore`.
    @usableFromInline static var invalidationLimit: Int { 64 }

    @inlinable
    init(levelNames: [String], debouncedLevels: Set<Int>, keptValues: Int) {
        self.levelNames = levelNames
        self.debouncedLevels = debouncedLevels
        self.keptValues = max(0, keptValues)
    }

    /// The number of entries: keys in use, and values kept.
    @inlinable
    var count: Int { entries.count }

    @inlinable
    mutating func next() -> Int {
        counter += 1
        return counter
    }

    /// What the machine let go of since the last call, for the caller to release after unlocking; `nil` when
    /// nothing (the common case costs one check).
    @inlinable
    mutating func takeReleased() -> StoreReleased? {
        guard !released.isEmpty else { return nil }
        defer { released = StoreReleased() }
        return released
    }

    /// `key`'s entry, if it has one. A key's work asks for its entry several times in a row (under one lock and
    /// across the locks of one change); the last one found is remembered, since comparing a key costs less than
    /// hashing it.
    @inlinable
    mutating func entry(_ key: Key) -> Entry? {
        if let recent, recent.key == key { return recent }
        guard let entry = entries[key] else { return nil }
        recent = entry
        return entry
    }

    /// `key`'s entry, if it has one, without remembering it (for the machine's queries).
    @inlinable
    func peek(_ key: Key) -> Entry? {
        if let recent, recent.key == key { return recent }
        return entries[key]
    }

    /// `key`'s entry, made when it has none.
    @inlinable @discardableResult
    mutating func ensureEntry(_ key: Key) -> Entry {
        if let entry = entry(key) { return entry }
        let entry = Entry(key: key, generation: next())
        entries[key] = entry
        recent = entry
        return entry
    }

    // MARK: Reading what is shown

    /// Whether `policy` takes `key`'s known value as it is: for a cache-first read, a value not invalidated and
    /// young enough; for a cache-only read, any; for a cache-then-network read with a maximum age, a value that needs
    /// no fetch. `snapshot` is what the key shows when the read answers with it: a value the policy takes, or any
    /// known value for a cache-then-network read (which fetches when it is not fresh). `nil` when the store holds no
    /// value for the key.
    @inlinable
    func cached(_ key: Key, under policy: ReadPolicy, now: Date) -> (snapshot: Snapshot?, fresh: Bool)? {
        guard let entry = peek(key), entry.confirmed != nil else { return nil }
        let fresh = isFresh(entry, under: policy, now: now)
        let answers = fresh || policy.kind == .cacheThenNetwork
        return (answers ? Snapshot(entry: entry, version: entry.version) : nil, fresh)
    }

    /// Whether `policy` takes `key`'s known value as it is (see ``cached(_:under:now:)``).
    @inlinable
    func isFresh(_ key: Key, under policy: ReadPolicy, now: Date) -> Bool {
        peek(key).map { isFresh($0, under: policy, now: now) } ?? false
    }

    /// What a read finds first: the response for `key` when `policy` takes the store's value as it is, with no
    /// fetch, and no optimistic change is pending (then building it runs no closure, so it is built under the lock:
    /// one reference to hand out); otherwise whether the store holds the key at all.
    @inlinable
    mutating func firstLook(_ key: Key, under policy: ReadPolicy, now: Date) -> FirstLook {
        // One lookup, not ``entry(_:)``: hits spread over many keys, and remembering the last costs more.
        guard let entry = entries[key] else { return .notHeld }
        guard entry.pending.isEmpty, !entry.isChanging, entry.queue.isEmpty, let confirmed = entry.confirmed,
            isFresh(entry, under: policy, now: now)
        else { return .held }
        if let hit = entry.hitResponse, entry.hitConfirmedVersion == entry.confirmedVersion,
            hit.version == entry.version
        {
            return .answer(hit)
        }
        let response = StoreResponse(
            value: confirmed.value, origin: confirmed.origin, savedAt: confirmed.savedAt, hasPendingChanges: false,
            error: nil, version: entry.version)
        released.response = entry.hitResponse?.storage
        entry.hitResponse = response
        entry.hitConfirmedVersion = entry.confirmedVersion
        return .answer(response)
    }

    /// Whether `policy` takes `entry`'s confirmed value as it is (see ``cached(_:under:now:)``).
    @inlinable
    func isFresh(_ entry: Entry, under policy: ReadPolicy, now: Date) -> Bool {
        guard let confirmed = entry.confirmed else { return false }
        switch policy.kind {
        case .networkFirst, .networkOnly: return false
        case .cacheOnly: return true
        case .cacheThenNetwork:
            guard policy.maxAgeSeconds != nil else { return false }
        case .cacheFirst: break
        }
        return entry.staleMark == 0 && policy.accepts(savedAt: confirmed.savedAt, now: now)
    }

    /// What `key` shows now, when it shows anything (a known value or pending changes).
    @inlinable
    func shown(_ key: Key) -> Snapshot? {
        guard let entry = peek(key), entry.showsSomething else { return nil }
        return Snapshot(entry: entry, version: entry.version)
    }

    /// Whether `key` shows anything now (a known value or pending changes).
    @inlinable
    func showsSomething(_ key: Key) -> Bool {
        peek(key)?.showsSomething ?? false
    }

    /// `key`'s shown value with `error` attached, as a new version; `nil` when it shows nothing (the read fails).
    @inlinable
    mutating func attach(_ error: any Error, to key: Key) -> Snapshot? {
        guard let entry = entry(key), entry.showsSomething else { return nil }
        entry.version = next()
        return Snapshot(entry: entry, version: entry.version, error: error)
    }

    // MARK: Observers

    /// Counts an observer of `key` and returns the subject it subscribes to (the key's, else `fresh`), with what
    /// the key shows now, if anything, to publish. Returns `nil`, counting nothing, when the key has no subject and
    /// `fresh` is `nil`: the caller makes one (outside the lock) and asks again.
    @inlinable
    mutating func observe(_ key: Key, fresh: Subject?) -> (subject: Subject, shown: Snapshot?)? {
        let entry = ensureEntry(key)
        if entry.subject == nil {
            guard let fresh else {
                release(key)
                return nil
            }
            entry.subject = fresh
        }
        entry.observers += 1
        return (entry.subject!, shown(key))
    }

    /// Forgets an observer of `key`; the last one takes the key's subject away (returned, to release unlocked).
    @inlinable
    mutating func stopObserving(_ key: Key) -> Subject? {
        guard let entry = entry(key) else { return nil }
        entry.observers -= 1
        let subject = entry.observers == 0 ? exchange(&entry.subject, with: nil) : nil
        release(key)
        return subject
    }

    // MARK: Level reads

    /// Starts a read of level `level` for `key`, unless the store knows better: a change of the key is running (the
    /// answer is what it shows) or a clear is emptying the levels (a miss). A level whose writes for the key are
    /// not issued yet (a debounced write, operations waiting) may be read, but its hit is older than what the store
    /// confirmed: `inStep` is false, and the store takes it as a miss. A level in step is read like any other (a
    /// value too old for the store may be young enough there, written by another process).
    @inlinable
    mutating func beginLevelRead(_ key: Key, level: Int) -> LevelRead {
        guard clearing == nil else { return .known(nil) }
        let entry = ensureEntry(key)
        guard !(entry.isKnown && (entry.isChanging || !entry.queue.isEmpty)) else {
            defer { release(key) }
            return .known(entry.confirmed == nil ? nil : shownNow(key))
        }
        // Levels that could not save what the store confirmed (or remove it) are behind too, until a save lands.
        let behind =
            entry.debounced[level] != nil || !entry.levelOps.isEmpty || entry.isIssuing
            || entry.failedVersion > entry.savedVersion
        entry.levelReads += 1
        let stamp = ReadStamp(
            generation: entry.generation, confirmedVersion: entry.confirmedVersion, staleMark: entry.staleMark)
        return .read(stamp, inStep: !behind)
    }

    /// Queues a read of `key` behind the changes of the key that run or wait (asked before it), when there are some:
    /// `reply` is called when its turn comes, and the read goes on then, seeing what they made. `false` when the key's
    /// turn is free (the read goes on at once).
    @inlinable
    mutating func awaitTurn(of key: Key, then reply: @escaping @Sendable () -> Void) -> Bool {
        guard let entry = entry(key), entry.isChanging || !entry.queue.isEmpty else { return false }
        enqueue(.barrier(reply: reply), on: entry)
        return true
    }

    /// Holds `key` in the store as a level read does, until ``endLevelRead(_:since:)``: a read that answered with a
    /// hit keeps the value it served shown until its fetch has begun.
    @inlinable
    mutating func holdKey(_ key: Key) {
        ensureEntry(key).levelReads += 1
    }

    /// Ends a level read that brought nothing to confirm (a miss, a failure, a value too old, a cancel). Returns
    /// what the key shows when the store learned something since the read began (a fetch or a write confirmed a
    /// value, or a removal or a clear overtook it): that is the read's answer, rather than reading on or fetching.
    /// A change that confirmed no value (another change's read of the levels, which found nothing) teaches nothing.
    @inlinable
    mutating func endLevelRead(_ key: Key, since stamp: ReadStamp? = nil) -> Snapshot? {
        guard let entry = entry(key) else { return nil }
        entry.levelReads -= 1
        defer { release(key) }
        guard let stamp,
            entry.generation != stamp.generation
                || (entry.confirmedVersion != stamp.confirmedVersion && entry.confirmed != nil)
        else { return nil }
        return shownNow(key)
    }

    /// Ends a read of the last level that brought nothing to confirm, and begins the read's fetch (see
    /// ``beginFetch(_:joining:since:completion:)``; `since` is the stamp of the read's first level read): the key
    /// stays in use from one to the other, so its entry is neither dropped nor made again. When the store learned
    /// something since this level read began, the read ends as ``endLevelRead(_:since:)`` ends it, and no fetch
    /// begins: what it learned is returned.
    @inlinable
    mutating func endLastLevelReadThenFetch(
        _ key: Key, readAt stamp: ReadStamp, since: ReadStamp?, asked: Int, completion: @escaping FetchCompletion
    ) -> LastLevelMiss {
        // What the store learned is the answer, unless an invalidation made it stale since: then the read fetches.
        guard let entry = entry(key),
            entry.generation == stamp.generation
                && (entry.confirmedVersion == stamp.confirmedVersion || entry.staleMark != 0)
        else { return .learned(endLevelRead(key, since: stamp)) }
        entry.levelReads -= 1
        return .fetch(beginFetch(key, joining: true, since: since, asked: asked, completion: completion))
    }

    /// What the store knows of `key` now, for a read that goes on to the levels: a value it confirms before the
    /// read's fetch begins is the read's answer (see ``beginFetch(_:joining:since:asked:completion:)``).
    @inlinable
    func stamp(of key: Key) -> ReadStamp {
        let entry = peek(key)
        return ReadStamp(
            generation: entry?.generation ?? 0, confirmedVersion: entry?.confirmedVersion ?? 0,
            staleMark: entry?.staleMark ?? 0)
    }

    /// Where a read that begins now stands in the store's order: a change asked after it is applied again to what
    /// its fetch brings.
    @inlinable
    var readStamp: Int { counter }

    // MARK: Fetches

    /// Adds a caller to `key`'s newest fetch in flight (when `joining`), or starts a fetch that the caller starts
    /// the upstream load of (see ``FetchStart``).
    ///
    /// A read that missed the levels passes `since`, the stamp of its first level read: when the store learned a
    /// value since (a fetch that answered while the levels were read), that value is the answer
    /// (``FetchStart/answered(_:)``), and no fetch starts.
    @inlinable
    mutating func beginFetch(
        _ key: Key, joining: Bool, since stamp: ReadStamp? = nil, asked: Int? = nil, replayingFrom replays: Int? = nil,
        completion: @escaping FetchCompletion
    ) -> FetchStart {
        let entry = ensureEntry(key)
        if let stamp, entry.confirmed != nil,
            entry.generation != stamp.generation
                || (entry.confirmedVersion != stamp.confirmedVersion && entry.staleMark == 0)
        {
            defer { release(key) }
            return .answered(shownNow(key))
        }
        let caller = next()
        // A fetch from before a removal or a clear brings nothing the caller may see: it is not joined.
        if joining, let index = entry.fetches.indices.last, !entry.fetches[index].isAbandoned,
            entry.fetches[index].generation == entry.generation
        {
            entry.fetches[index].callers.append(FetchCaller(id: caller, completion: completion))
            return .joined(fetch: entry.fetches[index].id, caller: caller)
        }
        // The fetch stands in the store's order where its caller was asked (a read: when it began, after the changes
        // asked before it; now, otherwise), or after the newest change no fetch logged: what it brings is as fresh as
        // that against invalidations, and the changes asked after are applied again to it. A read that found the key
        // stale by an invalidation made since it began stands after that invalidation, for both: its request goes
        // out after it, and the changes asked before it are not applied again. A fetch may get what an
        // upstream load that started earlier brings (a family that coalesces), so it counts changes from the oldest
        // fetch in flight since the last removal or clear: a change it did not miss may be applied twice (changes
        // must tolerate it), but none confirmed before a removal or a clear (the log keeps each change's generation:
        // a read asked before a removal whose fetch begins after it applies again only the changes confirmed since,
        // an optimistic change that outlived the removal among them). A refetch owed by a fetch that ended stands,
        // for the changes it applies again, where it would have been sent had the store known of that answer at
        // once (`replays`: the answer, or the invalidation after it): the changes asked while the answer waited its
        // turn are applied again to what the refetch brings.
        let position = max(asked.map { max($0, entry.staleMark) } ?? counter, entry.lastUnlogged)
        let oldest = entry.fetches.lazy.filter { $0.generation == entry.generation }.map { $0.logStart }.min()
        let logStart = min(oldest ?? .max, position, replays ?? .max)
        let id = next()
        entry.fetches.append(  // made in place: a fetch is copied through its value witnesses
            Fetch(
                id: id, generation: entry.generation, logStart: logStart, sentMark: position + 1,
                callers: InlineFirstArray(FetchCaller(id: caller, completion: completion))))
        return .starts(fetch: id, caller: caller)
    }

    /// Keeps the token of fetch `id`'s upstream load; returns it when it must be cancelled (every caller left
    /// before it was kept).
    @inlinable
    mutating func keepToken(_ token: any CancellationToken, ofFetch id: Int, for key: Key) -> (any CancellationToken)? {
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }) else {
            return nil
        }
        guard entry.fetches[index].isAbandoned else {
            entry.fetches[index].token = token
            return nil
        }
        entry.fetches.remove(at: index)
        trimLog(of: key)
        release(key)
        return token
    }

    /// Drops a caller of fetch `id`; when it was the last, the fetch is dropped and its token returned to cancel.
    /// What was dropped is returned too, to be released after unlocking.
    @inlinable
    mutating func leaveFetch(_ id: Int, caller: Int, of key: Key) -> (garbage: [Any], cancel: (any CancellationToken)?)
    {
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }),
            let callerIndex = entry.fetches[index].callers.firstIndex(where: { $0.id == caller })
        else { return ([], nil) }
        let left = entry.fetches[index].callers.remove(at: callerIndex)
        guard entry.fetches[index].callers.isEmpty else { return ([left.completion], nil) }
        guard let token = entry.fetches[index].token else {
            entry.fetches[index].isAbandoned = true  // its token is cancelled when it is kept
            return ([left.completion], nil)
        }
        let fetch = entry.fetches.remove(at: index)
        trimLog(of: key)
        release(key)
        return ([left.completion, fetch], token)
    }

    /// A fetch failed: it ends, and its callers get `error`. A fetch every caller left is over already (its key may
    /// be gone): nothing happens.
    @inlinable
    mutating func fetchFailed(_ id: Int, of key: Key, with error: any Error) -> Effects {
        var effects = Effects()
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }) else {
            return effects
        }
        let fetch = entry.fetches.remove(at: index)
        effects.refetches = beginOwedRefetch(key, replayingFrom: counter)
        trimLog(of: key)
        release(key)
        effects.fetchReplies = fetch.callers.map { FetchReply(completion: $0.completion, result: .failure(error)) }
        return effects
    }

    /// Begins a refetch of `key` for its observers (an invalidation, a revalidation), unless a fetch in flight will
    /// bring a value fresh against what made it stale: one sent after that, or one still waiting for the network.
    /// When the fetch in flight was sent before, one more fetch is owed, once, however many refetches are asked
    /// meanwhile: it begins when that fetch ends (``Effects/refetches``). `nil` when nothing begins now.
    @inlinable
    mutating func beginRefetch(_ key: Key, completion: @escaping FetchCompletion) -> FetchStart? {
        let entry = ensureEntry(key)
        let staleMark = entry.staleMark
        guard entry.fetches.contains(where: { !$0.isAbandoned }) else {
            return beginFetch(key, joining: false, completion: completion)
        }
        let freshOnItsWay = entry.fetches.contains { !$0.isAbandoned && ($0.sentMark.map { $0 > staleMark } ?? true) }
        if !freshOnItsWay, !entry.owesRefetch {
            entry.owesRefetch = true
            entry.owedSince = staleMark
        }
        release(key)
        return nil
    }

    /// A fetch of `key` ended: whether the refetch it owed begins now, for the key's observers. Not when nobody
    /// observes the key any more (its next cache-first read fetches, as it is stale), nor while another fetch is in
    /// flight (it stays owed when that one was sent before the key went stale).
    @inlinable
    mutating func takeOwedRefetch(_ key: Key) -> Bool {
        guard let entry = entry(key), entry.owesRefetch else { return false }
        let staleMark = entry.staleMark
        let others = entry.fetches.filter { !$0.isAbandoned }
        guard entry.observers > 0, others.isEmpty else {
            // Still owed while every other fetch in flight was sent before the key went stale.
            let older = others.allSatisfy { $0.sentMark.map { $0 <= staleMark } ?? false }
            entry.owesRefetch = entry.observers > 0 && older
            return false
        }
        entry.owesRefetch = false
        return true
    }

    /// Begins the refetch `key` owes its observers, when a fetch that owed it ended and it is due (see
    /// ``takeOwedRefetch(_:)``), standing at `replays` for the changes it applies again: asked after that, they are
    /// applied again to what it brings. Begun here, under the lock that ended the other fetch, it logs every change
    /// made from now on. Returns the refetch's id, for the caller to start its upstream load; zero when none begins.
    @inlinable
    mutating func beginOwedRefetch(_ key: Key, replayingFrom replays: Int) -> Int {
        guard takeOwedRefetch(key),
            case .starts(let id, _) = beginFetch(key, joining: false, replayingFrom: replays, completion: { _ in })
        else { return 0 }
        return id
    }

    /// Adds `completion` to the callers of fetch `id` of `key`, when it is still in flight.
    @inlinable
    mutating func addCaller(_ completion: @escaping FetchCompletion, toFetch id: Int, of key: Key) {
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }) else { return }
        entry.fetches[index].callers.append(FetchCaller(id: next(), completion: completion))
    }

    /// Fetch `id` of `key` found the network down: it waits for it before it sends its request, or (a store that
    /// answers from its cache) fails without one. Until now it counted as sent when it began: a refetch owed by an
    /// invalidation made since then is not needed, since what the fetch brings will be fresh against it, or, offline,
    /// nothing is fetched for it (a refetch owed before the fetch began stays owed).
    @inlinable
    mutating func fetchWaits(_ id: Int, of key: Key) {
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }) else { return }
        if entry.owesRefetch, !entry.fetches[index].isAbandoned,
            let began = entry.fetches[index].sentMark, entry.owedSince > began
        {
            entry.owesRefetch = false
        }
        entry.fetches[index].sentMark = nil
    }

    /// Fetch `id` of `key` sends its request now, a moment after it began: its upstream load looked at the
    /// connectivity as it started, and the network may have come back since the fetch began. It counts as sent now,
    /// so a refetch owed by an invalidation made in between is not needed: what it brings is fresh against it (see
    /// ``fetchWaits(_:of:)``, which a fetch that finds the network down calls instead).
    @inlinable
    mutating func fetchSendsNow(_ id: Int, of key: Key) {
        fetchWaits(id, of: key)
        fetchSent(id, of: key)
    }

    /// Fetch `id` of `key` sends its request now.
    @inlinable
    mutating func fetchSent(_ id: Int, of key: Key) {
        guard let entry = entry(key), let index = entry.fetches.firstIndex(where: { $0.id == id }) else { return }
        entry.fetches[index].sentMark = next()
    }

    // MARK: Changes

    /// Submits a change of `key`'s confirmed value. The caller that finds the key's queue idle gets its first
    /// ``Step`` and runs the queue until ``nextChange(of:now:)`` returns `nil`, or a step's effects end its turn
    /// (``Effects/endsTurn``); others get ``Step/queued``.
    @inlinable
    mutating func submit(_ job: Job, for key: Key, now: Date) -> Step {
        let entry = ensureEntry(key)
        if case .hit = job { entry.levelReads -= 1 }  // the read is over; its hit is judged in order
        if case .fetched(_, let id) = job, !entry.fetches.contains(where: { $0.id == id }) {
            release(key)
            var dropped = Effects(garbage: [job])  // every caller left: nothing to confirm
            dropped.endsTurn = true  // and this caller never had the key's turn
            return .applied(dropped)
        }
        guard !entry.isChanging else {
            enqueue(job, on: entry)
            return .queued
        }
        entry.isChanging = true
        // The key's turn is free: a change needing neither the levels' value nor a closure applies at once.
        if entry.queue.isEmpty, entry.isKnown || !job.needsBase, job.changes(in: entry) == nil {
            entry.asking = next()
            return .applied(endTurnIfDone(apply(job, to: key, value: job.base(in: entry), now: now), for: key))
        }
        enqueue(job, on: entry)
        return nextStep(for: key, now: now)
    }

    /// Puts `job` last in its key's queue, with when it was asked: a fetch that begins later does not count it as a
    /// change made while it was in flight, however late it is applied.
    @inlinable
    mutating func enqueue(_ job: Job, on entry: Entry) {
        entry.queue.append(job)
        entry.queueAsked.append(next())
    }

    /// A write of `key` applied at once when its turn is free. When the caller issues the key's level operations
    /// (``Effects/issueLevels``) and the write's save is the only one, it is handed out taken in `save`: the caller
    /// issues it, then the rest through ``takeLevelOps(of:)``, and the key keeps its operations' storage for its
    /// next write. `nil`, having changed nothing, while the key's changes run: the write then waits its turn through
    /// ``submit(_:for:now:)``. The same as submitting it, without building a job and a step. (The save is not
    /// returned beside the effects: an optional pair this large is destroyed through generic value witnesses.)
    @inlinable
    mutating func writeAtOnce(_ stored: StoredValue<Value>, for key: Key, save: inout LevelOp?) -> Effects? {
        let entry = ensureEntry(key)
        guard !entry.isChanging, entry.queue.isEmpty else { return nil }
        entry.asking = next()
        let effects = confirmWrite(stored, for: key)
        endAtOnce(entry, of: key, issuing: effects.issueLevels, save: &save)
        return effects
    }

    /// What fetch `id` brought, confirmed at once when `key`'s turn is free and no change was logged while fetches
    /// ran (there is none to apply again): the same as submitting ``Job/fetched(_:fetch:)``, without building a job
    /// and a step. The save is handed out in `save`, as ``writeAtOnce(_:for:save:)`` hands it out. `nil`, having
    /// changed nothing, otherwise (the fetch is over, the key's changes run, or some were logged): the value then
    /// takes its turn through ``submit(_:for:now:)``.
    @inlinable
    mutating func fetchedAtOnce(
        _ value: Value, fetch id: Int, for key: Key, now: Date, save: inout LevelOp?
    ) -> Effects? {
        guard let entry = entry(key), !entry.isChanging, entry.queue.isEmpty, entry.log.isEmpty,
            entry.fetches.contains(where: { $0.id == id })
        else { return nil }
        entry.asking = next()
        let effects = confirmFetch(id, for: key, value: value, now: now)
        endAtOnce(entry, of: key, issuing: effects.issueLevels, save: &save)
        return effects
    }

    /// Ends a change of `key` (its `entry`) applied at once: when its caller issues the key's level operations and the change's
    /// save is the only one, the save is handed out in `save` (moved out, the key keeping its list's storage); then
    /// the key is let go if nothing else needs it.
    @inlinable
    mutating func endAtOnce(_ entry: Entry, of key: Key, issuing: Bool, save: inout LevelOp?) {
        if issuing, entry.levelOps.count == 1 {
            save = entry.levelOps.removeLast()
            countSaves(in: save!, of: entry)
        }
        release(key)
    }

    /// Counts the level saves `operation` issues into its entry's saves in flight (the entry is kept until they land).
    @inlinable
    func countSaves(in operation: LevelOp, of entry: Entry) {
        switch operation {
        case .save(_, let targets, let skipsDebounced, _, _):
            entry.savesInFlight += skipsDebounced ? targets.count { !debouncedLevels.contains($0) } : targets.count
        case .flush: entry.savesInFlight += 1
        case .remove: entry.savesInFlight += levelNames.count
        }
    }

    /// A level save of `key` landed: a failure keeps the value in the store until a newer one is saved; a stale value
    /// saved is recorded stale as of `date` (after the level stamped it). Returns a record folded out of the limit,
    /// to release after unlocking.
    @inlinable
    mutating func saveLanded(_ key: Key, mark: SaveMark, failed: Bool, at date: Date) -> Invalidation? {
        if !failed { noteStamp(date) }
        var folded: Invalidation?
        // Stale since the invalidation it was saved under: a fetch sent after that one makes it fresh.
        if mark.stale {
            folded = record(Invalidation(date: stamped(date), generation: mark.staleSince) { $0 == key })
        }
        guard let entry = entry(key) else { return folded }
        entry.savesInFlight -= 1
        if entry.generation == mark.generation {
            if failed {
                entry.failedVersion = max(entry.failedVersion, mark.version)
            } else {
                entry.savedVersion = max(entry.savedVersion, mark.version)
            }
        }
        release(key)
        return folded
    }

    /// The next step of `key`'s queue, after a step's effects were performed; `nil` when the queue is empty (the
    /// caller stops running it).
    @inlinable
    mutating func nextChange(of key: Key, now: Date) -> Step? {
        guard let entry = entry(key) else { return nil }
        guard !entry.queue.isEmpty else {
            entry.isChanging = false
            release(key)
            return nil
        }
        return nextStep(for: key, now: now)
    }

    @inlinable
    mutating func nextStep(for key: Key, now: Date) -> Step {
        let entry = entry(key)!
        let job = entry.queue[0]
        if !entry.isKnown, job.needsBase { return .loadBase(generation: entry.generation) }
        guard let changes = job.changes(in: entry) else {
            entry.queue.removeFirst()
            entry.asking = entry.queueAsked.removeFirst()
            return .applied(endTurnIfDone(apply(job, to: key, value: job.base(in: entry), now: now), for: key))
        }
        entry.headRuns = true
        return .run(Work(generation: entry.generation, base: job.base(in: entry), changes: changes))
    }

    /// Gives up `key`'s turn when its queue is empty after a change, before the change's effects are performed:
    /// a read or change asked while they run (a reply's caller reading again) finds the key idle.
    @inlinable
    mutating func endTurnIfDone(_ effects: consuming Effects, for key: Key) -> Effects {
        guard let entry = entry(key), entry.queue.isEmpty else { return effects }
        entry.isChanging = false
        effects.endsTurn = true
        release(key)
        return effects
    }

    /// Commits the result of the ``Work`` that ran for the change at the head of `key`'s queue, and ends the turn
    /// when the queue is empty.
    @inlinable
    mutating func commit(_ work: Work, result: Value?, for key: Key, now: Date) -> Effects {
        endTurnIfDone(commitWork(work, result: result, for: key, now: now), for: key)
    }

    @inlinable
    mutating func commitWork(_ work: Work, result: Value?, for key: Key, now: Date) -> Effects {
        guard let entry = entry(key), !entry.queue.isEmpty else { return Effects() }
        entry.headRuns = false
        let job = entry.queue.removeFirst()
        entry.asking = entry.queueAsked.removeFirst()
        guard entry.generation == work.generation else {
            // Removed or cleared while it ran: an update is dropped (the removal was asked later), a settle runs
            // again on what is confirmed now, a fetch or a hit is judged stale and answers its callers.
            switch job {
            case .update, .write, .load:
                return Effects(fetchReplies: job.droppedReply.map { [$0] } ?? [], garbage: [job, result as Any])
            case .settle:
                entry.queue.insert(job, at: 0)
                entry.queueAsked.insert(entry.asking, at: 0)
            case .flush, .barrier, .add: return apply(job, to: key, value: nil, now: now)
            case .fetched, .hit: return apply(job, to: key, value: result, now: now)
            }
            return Effects(garbage: [result as Any])
        }
        return apply(job, to: key, value: result, now: now)
    }

    /// Confirms what the levels hold for a key that was not known, read for the change at the head of its queue.
    /// The hit is stale since the invalidation `staleSince` when one made before the read matched it, or as an
    /// invalidation made during the read marked the entry (the change holds it).
    @inlinable
    mutating func commitBase(
        _ hit: CachedValue<Value>?, level: Int, generation: Int, staleSince: Int?, for key: Key
    ) -> Effects {
        guard let entry = entry(key), entry.generation == generation, !entry.isKnown else {
            return Effects(garbage: [hit as Any])
        }
        entry.isKnown = true
        entry.confirmedVersion += 1
        guard let hit else { return Effects() }
        noteStamp(hit.savedAt)
        let origin = StoreOrigin.cache(levelNames[level])
        entry.confirmed = StoredValue(value: hit.value, origin: origin, savedAt: hit.savedAt)
        entry.staleMark = max(entry.staleMark, staleSince ?? 0)
        return Effects(publish: publish(key))
    }

    // MARK: Optimistic changes

    /// Adds a pending optimistic change to `key`, with the load of its `commit` (not started yet: a clear fails it,
    /// as it fails every pending change's); returns its id, what the key shows with it (for its observers, when it
    /// has some), and whether the levels' value must be read first (submit ``Job/load``). A change with an `order`
    /// goes before the changes of its queue with a greater sequence (made earlier, shown later); others go last.
    /// `nil`, adding nothing, when the store was cleared since `clears` was read (`unlessClearedSince`).
    @inlinable
    mutating func addMutation(
        _ change: @escaping Change, commit: PendingLoad<Void>? = nil, to key: Key, order: MutationOrder? = nil,
        unlessClearedSince clears: Int? = nil
    ) -> (id: Int, shown: Snapshot?, loads: Bool)? {
        if let clears, clears != self.clears { return nil }
        let entry = ensureEntry(key)
        let id = next()
        var mutation = Mutation(id: id, change: change, order: order)
        mutation.commit = commit
        guard !entry.isChanging else {
            // Shown in order: after the changes asked before it.
            enqueue(.add(mutation), on: entry)
            return (id, nil, !entry.isKnown)
        }
        entry.pending.insert(mutation)
        return (id, publish(key), !entry.isKnown)
    }

    /// Remembers what `key` showed with its pending changes (see ``PendingChanges``), computed by a publisher
    /// outside the lock.
    @inlinable
    mutating func remember(_ prefix: ShownPrefix, for key: Key) {
        guard let entry = entry(key), entry.confirmedVersion == prefix.confirmedVersion else { return }
        entry.pending.remember(prefix)
    }

    // MARK: Removal and clear

    /// Removes `key`'s value at once: the writes and updates queued for it are dropped, fetches and level reads in
    /// flight confirm nothing, optimistic changes stay pending, and the levels lose the key.
    @inlinable
    mutating func remove(_ key: Key) -> Effects {
        let entry = ensureEntry(key)
        var effects = Effects()
        let (dropped, kept) = dropQueuedByRemoval(of: entry)
        effects.garbage = [entry.confirmed as Any, dropped]
        effects.fetchReplies = dropped.compactMap { $0.droppedReply }
        entry.queue = kept
        entry.generation = next()
        entry.isKnown = true
        entry.confirmed = nil
        entry.staleMark = 0
        entry.owesRefetch = false  // what made it stale is gone with the value
        entry.confirmedVersion += 1
        effects.cancels = entry.debounced.values.map { $0.timer }
        entry.debounced = [:]
        entry.levelOps.append(
            .remove(
                ticket: nil,
                mark: SaveMark(generation: entry.generation, version: entry.confirmedVersion, staleSince: 0)
            ))
        effects.publish(publish(key))
        effects.issueLevels = startIssuing(key)
        return effects
    }

    /// The jobs of `entry`'s queue a removal or a clear drops, and those it keeps (with when they were asked). The
    /// job running now stays at the head: its commit takes it off and judges it (see ``commitWork(_:result:for:now:)``).
    /// A clear drops the optimistic changes waiting to be shown too.
    @inlinable
    func dropQueuedByRemoval(of entry: Entry, clearing: Bool = false) -> (dropped: [Job], kept: [Job]) {
        var dropped: [Job] = []
        var kept: [Job] = []
        var keptAsked: [Int] = []
        for (index, (job, asked)) in zip(entry.queue, entry.queueAsked).enumerated() {
            if job.isDroppedByRemoval || (clearing && job.added != nil), index > 0 || !entry.headRuns {
                dropped.append(job)
            } else {
                kept.append(job)
                keptAsked.append(asked)
            }
        }
        entry.queueAsked = keptAsked
        return (dropped, kept)
    }

    /// Forgets everything (a logout): every key shows nothing, pending changes are cancelled (their commits are
    /// returned to fail), debounced writes are cancelled, and the levels are emptied once what was decided before is
    /// issued (`removeAll`, or the caller that issues the last of it).
    @inlinable
    mutating func clear(completion: @escaping @Sendable () -> Void) -> Effects {
        clears += 1
        var effects = Effects()
        for (key, entry) in entries {
            let shownBefore = entry.showsSomething
            let (dropped, kept) = dropQueuedByRemoval(of: entry, clearing: true)
            let pending = entry.pending.removeAll() + dropped.compactMap { $0.added }
            effects.garbage += [entry.confirmed as Any, dropped, entry.levelOps, pending]
            effects.fetchReplies += dropped.compactMap { $0.droppedReply }
            effects.released += entry.levelOps.compactMap { $0.ticket }  // work waiting for dropped writes goes on
            effects.failedCommits += pending.compactMap { $0.commit }
            effects.cancels += entry.debounced.values.map { $0.timer }
            entry.generation = next()
            entry.isKnown = true
            entry.confirmed = nil
            entry.staleMark = 0
            entry.owesRefetch = false
            entry.confirmedVersion += 1
            (entry.failedVersion, entry.savedVersion) = (0, entry.confirmedVersion)
            entry.queue = kept
            entry.levelOps = []
            entry.debounced = [:]
            entry.keptStamp = nil
            if shownBefore || entry.observers > 0 { effects.publish(publish(key)) }
            release(key)
        }
        kept = []
        keptHead = 0
        keptCount = 0
        // The levels are emptied: nothing they will hold was saved before the clear.
        effects.garbage.append(exchange(&invalidations, with: []))
        effects.garbage.append(exchange(&refreshed, with: [:]))
        refreshedOrder = []
        refreshedHead = 0
        staleBefore = nil
        var clearing = clearing ?? Clearing()
        clearing.completions.append(completion)
        if issuing == 0, !clearing.isAssigned {
            clearing.isAssigned = true
            effects.removeAll = true
        }
        self.clearing = clearing
        return effects
    }

    /// A clear's `removeAll` was issued: returns the callers of the clears waiting for the levels to be empty, and
    /// the keys whose level operations were held (the caller issues them now, as it would its own).
    @inlinable
    mutating func removeAllIssued() -> (completions: [@Sendable () -> Void], held: [Key]) {
        let completions = clearing?.completions ?? []
        clearing = nil
        let keys = exchange(&held, with: []).filter { entries[$0] != nil && !entries[$0]!.levelOps.isEmpty }
        for key in keys { entry(key)!.isIssuing = true }
        issuing += keys.count
        return (completions, keys)
    }

    // MARK: Invalidation

    /// What a reader needs to judge `key`'s level value for invalidations, or `nil` when nothing was invalidated.
    @inlinable
    func staleRules(for key: Key) -> StaleRules? {
        guard staleBefore != nil || !invalidations.isEmpty else { return nil }
        return StaleRules(staleBefore: staleBefore, invalidations: invalidations, refreshedAt: refreshed[key])
    }

    /// Marks `key` stale at `date`; returns whether it is observed (the store then refetches it), and a record
    /// folded out of the limit, to release after unlocking.
    @inlinable
    mutating func invalidate(_ key: Key, at date: Date) -> (observed: Bool, garbage: Invalidation?) {
        let mark = next()
        let garbage = record(Invalidation(date: stamped(date), generation: mark) { $0 == key })
        return (!markStale([key], mark: mark).isEmpty, garbage)
    }

    /// The first half of an invalidation by predicate: records it, and returns every key the store holds, for the
    /// caller to judge with the predicate after unlocking (then ``markStale(_:mark:)`` with `mark`).
    @inlinable
    mutating func beginInvalidation(
        _ matches: @escaping @Sendable (Key) -> Bool, at date: Date
    ) -> (mark: Int, keys: [Key], garbage: Invalidation?) {
        let mark = next()
        let garbage = record(Invalidation(date: stamped(date), generation: mark, matches: matches))
        return (mark, Array(entries.keys), garbage)
    }

    /// Marks every key stale at `date`; returns the observed ones, and the records it replaces.
    @inlinable
    mutating func invalidateAll(at date: Date) -> (observed: [Key], garbage: [Invalidation]) {
        let mark = next()
        staleBefore = StaleBefore(date: stamped(date), generation: mark).merged(with: staleBefore)
        return (markStale(entries.keys, mark: mark), exchange(&invalidations, with: []))
    }

    /// Marks the entries of `keys` stale, as of `mark`; returns those that are observed.
    @inlinable
    mutating func markStale(_ keys: some Sequence<Key>, mark: Int) -> [Key] {
        var observed: [Key] = []
        for key in keys {
            guard let entry = entry(key) else { continue }
            entry.staleMark = max(entry.staleMark, mark)
            if entry.observers > 0 { observed.append(key) }
        }
        return observed
    }

    /// A level holds a value saved at `date` (it landed then, or was read with that date): an invalidation recorded
    /// later is dated no earlier, so that it judges that value stale even when the clock was set back since.
    @inlinable
    mutating func noteStamp(_ date: Date) {
        if latestStamp.map({ $0 < date }) ?? true { latestStamp = date }
    }

    /// `date`, or the latest date a level stamped a value with when that is later (the clock was set back): the date
    /// of an invalidation, which judges by date the values this store saved before it.
    @inlinable
    func stamped(_ date: Date) -> Date {
        latestStamp.map { max($0, date) } ?? date
    }

    /// Adds an invalidation record; returns the oldest when it no longer fits (folded into `staleBefore`).
    @inlinable
    mutating func record(_ invalidation: Invalidation) -> Invalidation? {
        invalidations.append(invalidation)
        guard invalidations.count > Self.invalidationLimit else { return nil }
        let oldest = invalidations.removeFirst()
        staleBefore = StaleBefore(date: oldest.date, generation: oldest.generation).merged(with: staleBefore)
        return oldest
    }

    /// `key`'s confirmed value is fresh from `point` in the store's order (a fetch sent then, a write): remembered
    /// while invalidations are recorded (see ``refreshed``).
    @inlinable
    mutating func noteRefreshed(_ key: Key, from point: Int) {
        guard staleBefore != nil || !invalidations.isEmpty else { return }
        refreshed[key] = max(refreshed[key] ?? 0, point)
        refreshedOrder.append(KeptRecord(key: key, stamp: point))
        while refreshed.count > Self.refreshedLimit, refreshedHead < refreshedOrder.count {
            let oldest = refreshedOrder[refreshedHead]
            refreshedHead += 1
            if refreshed[oldest.key] == oldest.stamp { refreshed[oldest.key] = nil }
        }
        if refreshedHead > 64, refreshedHead * 2 > refreshedOrder.count {
            refreshedOrder.removeFirst(refreshedHead)
            refreshedHead = 0
        }
    }

    /// The observed keys to revalidate: those with no value, an invalidated one, or one older than `maxAgeSeconds`
    /// (every value, without one). A key whose fetch is in flight is left to it.
    @inlinable
    func revalidationTargets(now: Date, maxAgeSeconds: Double?) -> [Key] {
        entries.compactMap { key, entry in
            guard entry.observers > 0, entry.fetches.isEmpty else { return nil }
            guard let confirmed = entry.confirmed, entry.staleMark == 0, let maxAgeSeconds else { return key }
            let age = now.timeIntervalSince(confirmed.savedAt)
            return confirmed.savedAt <= now && age < maxAgeSeconds ? nil : key
        }
    }

    // MARK: Level operations

    /// The next level operations of `key`, for the caller issuing them. `nil` when there are none: the caller
    /// stops, unless `removeAll` is set (it then issues a clear's `removeAll`).
    @inlinable
    mutating func takeLevelOps(of key: Key) -> (ops: InlineFirstArray<LevelOp>, removeAll: Bool)? {
        guard let entry = entry(key) else { return nil }
        if clearing == nil, !entry.levelOps.isEmpty {
            // One operation, the usual case, is moved out, and the entry keeps its storage for the next.
            let ops =
                entry.levelOps.count == 1
                ? InlineFirstArray(entry.levelOps.removeLast()) : InlineFirstArray(exchange(&entry.levelOps, with: []))
            if let first = ops.head { countSaves(in: first, of: entry) }
            for operation in ops.tail { countSaves(in: operation, of: entry) }
            return (ops, false)
        }
        entry.isIssuing = false
        issuing -= 1
        if clearing != nil, !entry.levelOps.isEmpty { held.append(key) }
        release(key)
        guard clearing != nil, issuing == 0, !clearing!.isAssigned else { return nil }
        clearing!.isAssigned = true
        return (InlineFirstArray(), true)
    }

    /// A debounced write's timer is running: keeps its token; returns it when the write was dropped meanwhile.
    @inlinable
    mutating func keepTimer(
        _ timer: any CancellationToken, ofWrite id: Int, level: Int, for key: Key
    ) -> (any CancellationToken)? {
        guard let entry = entry(key), entry.debounced[level]?.id == id else { return timer }
        entry.debounced[level]!.timer = timer
        return nil
    }

    /// A debounced write's timer fired: the write is issued if it is still the level's latest.
    @inlinable
    mutating func debounceFired(_ id: Int, level: Int, for key: Key) -> Effects {
        guard let entry = entry(key), let write = entry.debounced[level], write.id == id else { return Effects() }
        entry.debounced[level] = nil
        entry.levelOps.append(.flush(write.value, level: level, ticket: nil, mark: write.mark))
        var effects = Effects(garbage: [write.timer])
        effects.issueLevels = startIssuing(key)
        release(key)
        return effects
    }

    /// Whether the caller that decided level operations for `key` issues them: not when another caller is issuing
    /// the key's operations already, or a clear holds them until its `removeAll` is issued.
    @inlinable
    mutating func startIssuing(_ key: Key) -> Bool {
        let entry = entry(key)!
        guard !entry.levelOps.isEmpty, !entry.isIssuing else { return false }
        guard clearing == nil else {
            if !held.contains(key) { held.append(key) }
            return false
        }
        entry.isIssuing = true
        issuing += 1
        return true
    }

    // MARK: Applying changes

    /// Applies `job` to `key`, `value` being its closures' result (or its base when it has none).
    @inlinable
    mutating func apply(_ job: Job, to key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key)!
        switch job {
        case .write(let stored):
            return confirmWrite(stored, for: key)
        case .update(let change, let reply):
            guard entry.confirmed != nil || value != nil else {
                log(change, for: key)  // nothing to change; a fetch in flight gets it applied to what it brings
                let answer = reply.map { FetchReply(completion: $0, result: .success(shownNow(key))) }
                return Effects(fetchReplies: answer.map { [$0] } ?? [])
            }
            let stored = value.map { StoredValue(value: $0, origin: reply == nil ? .local : .network, savedAt: now) }
            changeMakesFresh(key)
            guard let reply else {
                return confirm(stored, for: key, logging: change, levels: levelNames.indices, debounces: true)
            }
            let saved = SaveTicket()
            let effects = confirm(
                stored, for: key, logging: change, levels: levelNames.indices, ticket: saved, answers: true)
            let shown = effects.lastPublished
            saved.whenSaved(.replies(InlineFirstArray(FetchReply(completion: reply, result: .success(shown)))))
            return effects
        case .fetched(_, let id):
            return confirmFetch(id, for: key, value: value, now: now)
        case .hit(let cached, let level, let stamp, let staleSince, let error, let reply):
            return confirmHit(
                cached, level: level, stamp: stamp, staleSince: staleSince, error: error, reply: reply, for: key)
        case .settle(let id, let accepted, let ticket):
            return settle(id, accepted: accepted, ticket: ticket, for: key, value: value, now: now)
        case .load:
            return Effects()
        case .flush(let ticket):
            return flushDebounced(of: key, ticket: ticket)
        case .barrier(let reply):
            return Effects(fetchReplies: [FetchReply(completion: { _ in reply() }, result: .success(shownNow(key)))])
        case .add(let mutation):
            entry.pending.insert(mutation)
            return Effects(publish: publish(key))
        }
    }

    /// Confirms a value the app wrote, for every level (a debounced one gets it with its burst).
    @inlinable
    mutating func confirmWrite(_ stored: StoredValue<Value>, for key: Key) -> Effects {
        let entry = entry(key)!
        changeMakesFresh(key)
        // Logged for a fetch in flight only (see ``log(_:for:)``): no closure is made otherwise.
        var change: Change?
        if entry.fetches.isEmpty {
            entry.lastUnlogged = max(entry.lastUnlogged, entry.asking)
        } else {
            change = { _ in stored.value }
        }
        return confirm(stored, for: key, logging: change, levels: levelNames.indices, debounces: true)
    }

    @inlinable
    mutating func confirmFetch(_ id: Int, for key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key)!
        guard let index = entry.fetches.firstIndex(where: { $0.id == id }) else {
            return Effects(garbage: [value as Any])
        }
        let fetch = entry.fetches.remove(at: index)
        let rebased = entry.log.contains(where: fetch.appliesAgain)
        // A refetch this fetch owed stands where it would have been sent had the store known of the answer at once
        // (the answer, or the invalidation after it): the changes asked since are applied again to what it brings.
        let replays = max(entry.asking, entry.staleMark)
        defer { trimLog(of: key) }
        guard fetch.generation == entry.generation else {
            let replies = fetch.callers.map {
                FetchReply(completion: $0.completion, result: .failure(StoreError.discarded))
            }
            var effects = Effects(fetchReplies: replies, garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        guard id > entry.lastConfirmedFetch else {
            // A fetch started after this one was confirmed first: what it brought stays, and is the answer.
            let shown = shownNow(key)
            var effects = Effects(
                fetchReplies: fetch.callers.map { FetchReply(completion: $0.completion, result: .success(shown)) },
                garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        entry.lastConfirmedFetch = id
        // Sent after the invalidation: fresh.
        if let sent = fetch.sentMark, sent > entry.staleMark { makeFresh(key, from: sent) }
        let stored = value.map { StoredValue(value: $0, origin: rebased ? .local : .network, savedAt: now) }
        // The callers are answered once the value is saved to the levels.
        let saved = SaveTicket()
        var effects = confirm(stored, for: key, logging: nil, levels: levelNames.indices, ticket: saved, answers: true)
        let shown = effects.lastPublished
        saved.whenSaved(
            .replies(fetch.callers.mapInline { FetchReply(completion: $0.completion, result: .success(shown)) }))
        effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
        return effects
    }

    @inlinable
    mutating func confirmHit(
        _ cached: CachedValue<Value>, level: Int, stamp: ReadStamp, staleSince: Int?, error: (any Error)?,
        reply: @escaping HitReply, for key: Key
    ) -> Effects {
        let entry = entry(key)!
        guard entry.generation == stamp.generation, entry.confirmedVersion == stamp.confirmedVersion else {
            // The store learned something newer while the level was read (a write, a removal, a clear): what it
            // shows now is the answer, never the level's older value.
            return Effects(hitReplies: [HitReplyDelivery(reply: reply, snapshot: shownNow(key))], garbage: [cached])
        }
        noteStamp(cached.savedAt)
        let stored = StoredValue(value: cached.value, origin: .cache(levelNames[level]), savedAt: cached.savedAt)
        // Stale as the invalidations recorded before the read judged the level's value (`staleSince`), or as one
        // that matched the key while it was read: that one marked the entry, which the read holds.
        entry.staleMark =
            entry.staleMark != stamp.staleMark ? max(entry.staleMark, staleSince ?? 0) : staleSince ?? 0
        var effects = confirm(stored, for: key, logging: nil, levels: 0..<level, error: error, answers: true)
        effects.hitReplies = [HitReplyDelivery(reply: reply, snapshot: effects.lastPublished)]
        return effects
    }

    @inlinable
    mutating func settle(
        _ id: Int, accepted: Bool, ticket: SaveTicket?, for key: Key, value: Value?, now: Date
    ) -> Effects {
        let entry = entry(key)!
        var effects = Effects(garbage: [value as Any])
        guard let mutation = entry.pending.remove(id, accepted: accepted, confirmedVersion: entry.confirmedVersion)
        else {
            effects.released = ticket.map { [$0] } ?? []
            return effects
        }
        guard accepted else {
            return Effects(publish: publish(key), garbage: [mutation], released: ticket.map { [$0] } ?? [])
        }
        let stored = value.map { StoredValue(value: $0, origin: .local, savedAt: now) }
        changeMakesFresh(key)
        effects = confirm(stored, for: key, logging: mutation.change, levels: levelNames.indices, ticket: ticket)
        effects.garbage.append(mutation)
        return effects
    }

    /// Turns `key`'s debounced writes into level operations now (a flush), cancelling their timers; `ticket` (held
    /// once for the flush of this key) is held by each.
    @inlinable
    mutating func flushDebounced(of key: Key, ticket: SaveTicket) -> Effects {
        let entry = entry(key)!
        var effects = Effects(released: [ticket])
        for (level, write) in entry.debounced.sorted(by: { $0.key < $1.key }) {
            ticket.hold()
            entry.levelOps.append(.flush(write.value, level: level, ticket: ticket, mark: write.mark))
            effects.cancels.append(write.timer)
        }
        entry.debounced = [:]
        effects.issueLevels = startIssuing(key)
        return effects
    }

    /// The keys a flush asks: those with debounced writes waiting, or changes queued or running (which may make
    /// some).
    @inlinable
    func keysToFlush() -> [Key] {
        entries.compactMap { key, entry in
            entry.debounced.isEmpty && entry.queue.isEmpty && !entry.isChanging ? nil : key
        }
    }

    /// Replaces `key`'s confirmed value, notes the change for the fetches in flight, decides the level writes and
    /// publishes the new shown value (``Effects/lastPublished`` when it `answers` a caller too). When `debounces`, the
    /// debounced levels are written when their timers fire; otherwise every level at once (a debounced write waiting
    /// is dropped: this one is newer). The writes hold `ticket`, released at once when there are none.
    @inlinable
    mutating func confirm(
        _ stored: StoredValue<Value>?, for key: Key, logging change: Change?, levels targets: Range<Int>,
        error: (any Error)? = nil, debounces: Bool = false, ticket: SaveTicket? = nil, answers: Bool = false
    ) -> Effects {
        let entry = entry(key)!
        var effects = Effects()
        effects.replaced = exchange(&entry.confirmed, with: stored)  // moved out, released after unlocking
        entry.isKnown = true
        entry.confirmedVersion += 1
        if let change { log(change, for: key) }
        let mark = SaveMark(
            generation: entry.generation, version: entry.confirmedVersion, staleSince: entry.staleMark)
        if let stored {
            if !targets.isEmpty {
                entry.levelOps.append(
                    .save(stored.value, levels: targets, skipsDebounced: debounces, ticket: ticket, mark: mark))
            } else if let ticket {
                effects.released.append(ticket)
            }
            for level in targets where !debouncedLevels.isEmpty && debouncedLevels.contains(level) {
                guard debounces else {
                    if let dropped = entry.debounced.removeValue(forKey: level) {
                        effects.cancels.append(dropped.timer)
                    }
                    continue
                }
                let write = DebouncedWrite(id: next(), value: stored.value, mark: mark, timer: FinishedToken())
                if let replaced = entry.debounced.updateValue(write, forKey: level) {
                    effects.cancels.append(replaced.timer)
                }
                effects.debounce.append(DebounceStart(level: level, id: write.id, value: stored.value))
            }
        } else {
            effects.cancels += entry.debounced.values.map { $0.timer }
            entry.debounced = [:]
            entry.levelOps.append(.remove(ticket: ticket, mark: mark))
        }
        effects.publish(publish(key, error: error, answers: answers))
        effects.issueLevels = startIssuing(key)
        return effects
    }

    // MARK: Bookkeeping

    /// `key`'s value is fresh from `point` in the store's order: not stale, and not judged stale by an older
    /// invalidation when only the levels hold it.
    /// What the app writes is the latest it knows, as of when it asked: the key is fresh, unless an invalidation came
    /// after that (while the change waited for its turn).
    @inlinable
    mutating func changeMakesFresh(_ key: Key) {
        let asked = entry(key)!.asking
        if asked > entry(key)!.staleMark { makeFresh(key, from: asked) }
    }

    @inlinable
    mutating func makeFresh(_ key: Key, from point: Int) {
        entry(key)!.staleMark = 0
        noteRefreshed(key, from: point)
    }

    @inlinable
    mutating func log(_ change: @escaping Change, for key: Key) {
        let entry = entry(key)!
        guard !entry.fetches.isEmpty else {
            entry.lastUnlogged = max(entry.lastUnlogged, entry.asking)
            return
        }
        // Numbered by when it was asked: a fetch that began before applies it again, one that began after does not.
        entry.log.append(LoggedChange(sequence: entry.asking, generation: entry.generation, change: change))
    }

    /// Forgets the logged changes no fetch in flight needs any more.
    @inlinable
    mutating func trimLog(of key: Key) {
        let entry = entry(key)!
        guard let oldest = entry.fetches.map({ $0.logStart }).min() else {
            entry.log = []
            return
        }
        entry.log.removeAll { $0.sequence <= oldest }
    }

    /// A new version of what `key` shows: the snapshot its observers are sent, made only when it has observers or
    /// when it `answers` a caller as well (a snapshot holds its response: made for nobody, it would be an allocation
    /// for nothing).
    @inlinable
    mutating func publish(_ key: Key, error: (any Error)? = nil, answers: Bool = false) -> Snapshot? {
        let entry = entry(key)!
        entry.version = next()
        guard answers || entry.subject != nil else { return nil }
        return Snapshot(entry: entry, version: entry.version, error: error)
    }

    /// What `key` shows, at its current version (a value of `nil` when it shows nothing).
    @inlinable
    func shownNow(_ key: Key) -> Snapshot {
        let entry = peek(key)!
        return Snapshot(entry: entry, version: entry.version)
    }

    /// Drops `key`'s entry when nothing needs it any more, unless its value is among the last `keptValues` to
    /// fall out of use.
    @inlinable
    mutating func release(_ key: Key) {
        guard let entry = entry(key), entry.isIdle else { return }
        guard keptValues > 0, entry.confirmed != nil else {
            drop(key)
            return
        }
        if entry.keptStamp == nil { keptCount += 1 }
        let stamp = next()
        entry.keptStamp = stamp
        kept.append(KeptRecord(key: key, stamp: stamp))
        while keptCount > keptValues, keptHead < kept.count {
            let oldest = kept[keptHead]
            keptHead += 1
            guard let candidate = entries[oldest.key], candidate.keptStamp == oldest.stamp else { continue }
            keptCount -= 1
            entries[oldest.key]!.keptStamp = nil
            if candidate.isIdle { drop(oldest.key) }
        }
        // Records go stale as keys come back into use: compacted once they outnumber the live ones.
        if kept.count - keptHead > 2 * keptCount + 64 {
            kept = kept[keptHead...].filter { entries[$0.key]?.keptStamp == $0.stamp }
            keptHead = 0
        } else if keptHead > 64, keptHead * 2 > kept.count {
            kept.removeFirst(keptHead)
            keptHead = 0
        }
    }

    @inlinable
    mutating func drop(_ key: Key) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        if recent?.key == key { recent = nil }
        if entry.keptStamp != nil { keptCount -= 1 }
        released.add(entry)
    }
}
