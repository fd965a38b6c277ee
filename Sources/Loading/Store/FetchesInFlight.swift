#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's fetches: the part that keeps them (`FetchesInFlight`), then the machine's events that
// begin, join, leave and end them.

extension StoreMachine {
    /// A key's fetches in flight, oldest first, and the newest fetch whose value was confirmed: last asked wins, so a
    /// fetch's value is confirmed only if no fetch started after it was confirmed first. A fetch from before a
    /// removal or a clear (another generation) stays until it ends, but brings nothing a caller may see.
    struct FetchesInFlight: Sendable {
        private var fetches: [Fetch] = []
        /// The id of the newest fetch whose value was confirmed.
        private var lastConfirmed = 0

        /// Whether no fetch is in flight.
        var isEmpty: Bool { fetches.isEmpty }

        /// Whether a fetch in flight is not abandoned (left by every caller before its token came).
        var hasCallers: Bool { fetches.contains { !$0.isAbandoned } }

        /// The fetches in flight that are not abandoned, oldest first; read in place, not copied.
        var withCallers: LazyFilterSequence<[Fetch]> { fetches.lazy.filter { !$0.isAbandoned } }

        /// Whether a fetch of `generation` is in flight: the key is loading.
        func isLoading(generation: Int) -> Bool {
            fetches.contains { $0.generation == generation }
        }

        /// Whether fetch `id` is in flight.
        func contains(_ id: Int) -> Bool {
            fetches.contains { $0.id == id }
        }

        /// Fetch `id`, while it is in flight.
        func fetch(_ id: Int) -> Fetch? {
            fetches.first { $0.id == id }
        }

        /// Where the oldest fetch in flight starts counting the changes it applies again (of `generation` only,
        /// when given); `nil` when none is in flight.
        func oldestLogStart(generation: Int? = nil) -> Int? {
            fetches.lazy.filter { generation == nil || $0.generation == generation }.map { $0.logStart }.min()
        }

        /// Adds `caller` to the newest fetch in flight when it is of `generation` and still has callers; returns its
        /// id, or `nil` when there is none to join.
        mutating func join(_ caller: FetchCaller, generation: Int) -> Int? {
            guard let index = fetches.indices.last, !fetches[index].isAbandoned,
                fetches[index].generation == generation
            else { return nil }
            fetches[index].callers.append(caller, id: caller.id)
            return fetches[index].id
        }

        /// A fetch begins, newest of all (made here, in place: a fetch is copied through its value witnesses).
        mutating func begin(id: Int, generation: Int, logStart: Int, sentMark: Int, caller: FetchCaller) {
            fetches.append(
                Fetch(
                    id: id, generation: generation, logStart: logStart, sentMark: sentMark,
                    callers: OrderedQueue(caller, id: caller.id)))
        }

        /// Adds `caller` to fetch `id`; `false` when it is not in flight.
        mutating func add(_ caller: FetchCaller, to id: Int) -> Bool {
            update(id) { $0.callers.append(caller, id: caller.id) } != nil
        }

        /// Keeps the token of fetch `id`'s upstream load. Returns `true` when every caller left the fetch before:
        /// it ends now, and the token is the caller's to cancel.
        mutating func keepToken(_ token: any CancellationToken, of id: Int) -> Bool {
            let abandoned = update(id) { fetch in
                if !fetch.isAbandoned { fetch.token = token }
                return fetch.isAbandoned
            }
            guard abandoned == true else { return false }
            _ = end(id)
            return true
        }

        /// Drops `caller` of fetch `id`; `nil` when it is not one. When it was the last, a fetch whose token was
        /// kept ends (`ended`: the caller cancels its token); one whose token is not kept yet is abandoned (the token
        /// is cancelled when it is kept).
        mutating func leave(_ caller: Int, of id: Int) -> (left: FetchCaller, ended: Fetch?)? {
            let left = update(id) { fetch -> (FetchCaller, hasToken: Bool)? in
                guard let left = fetch.callers.remove(id: caller) else { return nil }
                guard fetch.callers.isEmpty else { return (left, false) }
                if fetch.token == nil { fetch.isAbandoned = true }
                return (left, fetch.token != nil)
            }
            guard let (caller, hasToken) = left ?? nil else { return nil }
            return (caller, hasToken ? end(id) : nil)
        }

        /// Fetch `id` sends its request at `mark`, in the store's order.
        mutating func send(_ id: Int, at mark: Int) {
            _ = update(id) { $0.sentMark = mark }
        }

        /// Fetch `id` waits for the network before it sends its request: it counts as not sent. Returns when it had
        /// counted as sent, while it has callers.
        mutating func wait(_ id: Int) -> Int? {
            update(id) { fetch in
                defer { fetch.sentMark = nil }
                return fetch.isAbandoned ? nil : fetch.sentMark
            } ?? nil
        }

        /// Fetch `id` was answered by level `level`, which another process saved the value to at `savedAt`.
        mutating func noteLevelAnswer(of id: Int, level: Int, savedAt: Double) {
            _ = update(id) { $0.levelAnswer = (level, savedAt) }
        }

        /// Fetch `id` ends; `nil` when it was not in flight. The list keeps its storage: the machine takes it back
        /// (``giveStorage(to:)``).
        mutating func end(_ id: Int) -> Fetch? {
            guard let index = fetches.firstIndex(where: { $0.id == id }) else { return nil }
            return fetches.remove(at: index)
        }

        /// Takes `spare`'s storage when the list has none, before a fetch begins: the storage another key's
        /// fetches left (see ``giveStorage(to:)``), so that the next key to fetch makes none.
        mutating func takeStorage(from spare: inout [Fetch]) {
            if fetches.capacity == 0 { swap(&fetches, &spare) }
        }

        /// Lets go of the list's storage once no fetch is in flight: a key holds no room for fetches between them.
        /// It goes to `spare` when that has none (``takeStorage(from:)``).
        mutating func giveStorage(to spare: inout [Fetch]) {
            guard fetches.isEmpty, fetches.capacity > 0 else { return }
            if spare.capacity == 0 { swap(&fetches, &spare) } else { fetches = [] }
        }

        /// Whether the value fetch `id` (ended) brought is confirmed: not when a fetch started after it was confirmed
        /// first. Notes it as the newest confirmed.
        mutating func confirm(_ id: Int) -> Bool {
            guard id > lastConfirmed else { return false }
            lastConfirmed = id
            return true
        }

        private mutating func update<Result>(_ id: Int, _ change: (inout Fetch) -> Result) -> Result? {
            guard let index = fetches.firstIndex(where: { $0.id == id }) else { return nil }
            return change(&fetches[index])
        }
    }

    /// A fetch in flight and the callers waiting for it; only ``FetchesInFlight`` changes it.
    struct Fetch: Sendable {
        init(id: Int, generation: Int, logStart: Int, sentMark: Int, callers: OrderedQueue<FetchCaller>) {
            self.id = id
            self.generation = generation
            self.logStart = logStart
            self.callers = callers
            self.sentMark = sentMark
        }

        let id: Int
        let generation: Int
        /// Logged changes with a greater sequence number were made after the fetch started.
        let logStart: Int
        /// In the order they joined (their ids grow in that order).
        fileprivate(set) var callers: OrderedQueue<FetchCaller>
        fileprivate(set) var token: (any CancellationToken)?
        /// Every caller left before the token was kept: the token is cancelled when it is.
        fileprivate(set) var isAbandoned = false
        /// When its request went out, in the store's order: just after its caller was asked, or later for a fetch that
        /// waited for the network (`nil` while it waits). What it brings is fresh against the invalidations made
        /// before.
        fileprivate(set) var sentMark: Int?
        /// The level another process saved the answer to, and when (seconds since the reference date), when the
        /// answer came from there (see ``StoreMachine/fetchAnsweredByLevel(_:of:level:savedAt:)``).
        fileprivate(set) var levelAnswer: (level: Int, savedAt: Double)?

        /// Whether `change` was made while this fetch was in flight, in its generation: what the fetch brings gets it
        /// applied again.
        func appliesAgain(_ change: LoggedChange) -> Bool {
            change.sequence > logStart && change.generation == generation
        }
    }
}

extension StoreMachine {
    /// Adds a caller to `key`'s newest fetch in flight (when `joining`), or starts a fetch that the caller starts
    /// the upstream load of (see ``FetchStart``).
    ///
    /// A read that missed the levels passes `since`, the stamp of its first level read: when the store learned a
    /// value since (a fetch that answered while the levels were read), that value is the answer
    /// (``FetchStart/answered(_:)``), and no fetch starts.
    mutating func beginFetch(
        _ key: Key, joining: Bool, since stamp: ReadStamp? = nil, asked: Int? = nil, replayingFrom replays: Int? = nil,
        completion: @escaping FetchCompletion
    ) -> FetchStart {
        let entry = ensureEntry(key)
        if let stamp, entry.confirmed.value != nil,
            entry.generation != stamp.generation
                || (entry.confirmed.version != stamp.confirmedVersion && !entry.staleness.isStale)
        {
            defer { release(key) }
            return .answered(shownNow(key))
        }
        let caller = next()
        // A fetch from before a removal or a clear brings nothing the caller may see: it is not joined.
        if joining,
            let id = entry.work.fetches.join(
                FetchCaller(id: caller, completion: completion), generation: entry.generation)
        {
            return .joined(fetch: id, caller: caller)
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
        let position = max(asked.map { max($0, entry.staleness.mark) } ?? counter, entry.log.lastUnlogged)
        let oldest = entry.work.fetches.oldestLogStart(generation: entry.generation)
        let logStart = min(oldest ?? .max, position, replays ?? .max)
        let id = next()
        entry.work.beginFetch(
            id: id, generation: entry.generation, logStart: logStart, sentMark: position + 1,
            caller: FetchCaller(id: caller, completion: completion), spare: &spareFetches)
        loadingMayChange(entry)
        return .starts(fetch: id, caller: caller)
    }

    /// Keeps the token of fetch `id`'s upstream load; returns it when it must be cancelled (every caller left
    /// before it was kept).
    mutating func keepToken(_ token: any CancellationToken, ofFetch id: Int, for key: Key) -> (
        any CancellationToken
    )? {
        guard let entry = entry(key), entry.work.fetches.keepToken(token, of: id) else { return nil }
        fetchEnded(entry)
        trimLog(of: key)
        release(key)
        return token
    }

    /// Drops a caller of fetch `id`; when it was the last, the fetch is dropped and its token returned to cancel.
    /// What was dropped is returned too, to be released after unlocking.
    mutating func leaveFetch(_ id: Int, caller: Int, of key: Key) -> (
        garbage: [Any], cancel: (any CancellationToken)?
    ) {
        guard let entry = entry(key), let (left, ended) = entry.work.fetches.leave(caller, of: id) else {
            return ([], nil)
        }
        guard let fetch = ended, let token = fetch.token else { return ([left.completion], nil) }
        fetchEnded(entry)
        trimLog(of: key)
        release(key)
        return ([left.completion, fetch], token)
    }

    /// A fetch failed: it ends, and its callers get `error`. A fetch every caller left is over already (its key may
    /// be gone): nothing happens.
    mutating func fetchFailed(_ id: Int, of key: Key, with error: any Error) -> Effects {
        var effects = Effects()
        guard let entry = entry(key), let fetch = entry.work.fetches.end(id) else { return effects }
        effects.refetches = beginOwedRefetch(key, replayingFrom: counter)
        fetchEnded(entry)
        noteFailure(error, of: key)
        trimLog(of: key)
        release(key)
        effects.fetchReplies = fetch.callers.map { FetchReply(completion: $0.completion, result: .failure(error)) }
        return effects
    }

    /// Begins a refetch of `key` for its observers (an invalidation, a revalidation), unless a fetch in flight will
    /// bring a value fresh against what made it stale: one sent after that, or one still waiting for the network.
    /// When the fetch in flight was sent before, one more fetch is owed, once, however many refetches are asked
    /// meanwhile: it begins when that fetch ends (``Effects/refetches``). `nil` when nothing begins now.
    mutating func beginRefetch(_ key: Key, completion: @escaping FetchCompletion) -> FetchStart? {
        let entry = ensureEntry(key)
        let staleMark = entry.staleness.mark
        guard entry.work.fetches.hasCallers else {
            return beginFetch(key, joining: false, completion: completion)
        }
        let freshOnItsWay = entry.work.fetches.withCallers.contains { $0.sentMark.map { $0 > staleMark } ?? true }
        if !freshOnItsWay { entry.staleness.oweRefetch() }
        release(key)
        return nil
    }

    /// A fetch of `key` ended: whether the refetch it owed begins now, for the key's observers. Not when nobody
    /// observes the key any more (its next cache-first read fetches, as it is stale), nor while another fetch is in
    /// flight (it stays owed when that one was sent before the key went stale).
    mutating func takeOwedRefetch(_ key: Key) -> Bool {
        guard let entry = entry(key), entry.staleness.owesRefetch else { return false }
        let staleMark = entry.staleness.mark
        let others = entry.work.fetches.withCallers
        guard entry.observers > 0, others.isEmpty else {
            // Still owed while every other fetch in flight was sent before the key went stale.
            let older = others.allSatisfy { $0.sentMark.map { $0 <= staleMark } ?? false }
            if entry.observers == 0 || !older { entry.staleness.settleRefetch() }
            return false
        }
        entry.staleness.settleRefetch()
        return true
    }

    /// Begins the refetch `key` owes its observers, when a fetch that owed it ended and it is due (see
    /// ``takeOwedRefetch(_:)``), standing at `replays` for the changes it applies again: asked after that, they are
    /// applied again to what it brings. Begun here, under the lock that ended the other fetch, it logs every change
    /// made from now on. Returns the refetch's id, for the caller to start its upstream load; zero when none begins.
    mutating func beginOwedRefetch(_ key: Key, replayingFrom replays: Int) -> Int {
        guard takeOwedRefetch(key),
            case .starts(let id, _) = beginFetch(key, joining: false, replayingFrom: replays, completion: { _ in })
        else { return 0 }
        return id
    }

    /// Adds `completion` to the callers of fetch `id` of `key`, when it is still in flight.
    mutating func addCaller(_ completion: @escaping FetchCompletion, toFetch id: Int, of key: Key) {
        guard let entry = entry(key), entry.work.fetches.contains(id) else { return }
        _ = entry.work.fetches.add(FetchCaller(id: next(), completion: completion), to: id)
    }

    /// Fetch `id` of `key` found the network down: it waits for it before it sends its request, or (a store that
    /// answers from its cache) fails without one. Until now it counted as sent when it began: a refetch owed by an
    /// invalidation made since then is not needed, since what the fetch brings will be fresh against it, or, offline,
    /// nothing is fetched for it (a refetch owed before the fetch began stays owed).
    mutating func fetchWaits(_ id: Int, of key: Key) {
        guard let entry = entry(key), let sent = entry.work.fetches.wait(id) else { return }
        entry.staleness.fetchWaits(sentAt: sent)
    }

    /// Fetch `id` of `key` sends its request now, a moment after it began: its upstream load looked at the
    /// connectivity as it started, and the network may have come back since the fetch began. It counts as sent now,
    /// so a refetch owed by an invalidation made in between is not needed: what it brings is fresh against it (see
    /// ``fetchWaits(_:of:)``, which a fetch that finds the network down calls instead).
    mutating func fetchSendsNow(_ id: Int, of key: Key) {
        fetchWaits(id, of: key)
        fetchSent(id, of: key)
    }

    /// Fetch `id` of `key` sends its request now.
    mutating func fetchSent(_ id: Int, of key: Key) {
        guard let entry = entry(key), entry.work.fetches.contains(id) else { return }
        entry.work.fetches.send(id, at: next())
    }
}

extension StoreMachine {
    /// How a caller's fetch begins (see ``StoreMachine/beginFetch(_:joining:since:completion:)``).
    enum FetchStart {
        /// The caller begins fetch `fetch`, as its caller `caller`, and starts its upstream load.
        case starts(fetch: Int, caller: Int)
        /// The caller joined fetch `fetch` in flight, as its caller `caller`.
        case joined(fetch: Int, caller: Int)
        /// The store learned a value since the caller's read began: it is the answer, and no fetch begins.
        case answered(Snapshot)

        /// The fetch the caller waits for, and its id there (what leaving it takes); `nil` when answered.
        var joinedFetch: (id: Int, caller: Int)? {
            switch self {
            case .starts(let fetch, let caller), .joined(let fetch, let caller): (fetch, caller)
            case .answered: nil
            }
        }

        /// Whether the caller starts the fetch's upstream load.
        var starts: Bool {
            if case .starts = self { true } else { false }
        }
    }

    /// How a read of the last level that brought nothing ends (see
    /// ``StoreMachine/endLastLevelReadThenFetch(_:readAt:since:completion:)``).
    enum LastLevelMiss {
        /// The store learned something since the level read began: what it shows is the answer (`nil`: nothing
        /// changed after all), and no fetch begins.
        case learned(Snapshot?)
        /// The read's fetch began.
        case fetch(FetchStart)
    }

    /// Fetch `id` of `key` is answered by the value another process saved to level `level` at `savedAt`: confirmed
    /// with that date, as a hit of that level (saved to the faster levels only).
    mutating func fetchAnsweredByLevel(_ id: Int, of key: Key, level: Int, savedAt: Date) {
        entry(key)?.work.fetches.noteLevelAnswer(of: id, level: level, savedAt: savedAt.timeIntervalSinceReferenceDate)
    }

    /// A caller waiting for a fetch.
    struct FetchCaller: Sendable {
        init(id: Int, completion: @escaping FetchCompletion) {
            self.id = id
            self.completion = completion
        }

        let id: Int
        let completion: FetchCompletion
    }
}
