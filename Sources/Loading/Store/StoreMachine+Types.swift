#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What the store knows of one key in use. A reference, so that changing a field costs neither a copy of the
    /// entry nor a second lookup of its key; it is reached only through the machine, which only the store's lock
    /// reaches (that lock is what makes it safe to send). Its fields skip the run-time exclusivity checks for the
    /// same reason: no two accesses can overlap under the lock, and the checks cost about 6,000 instructions per
    /// first read (Benchmarks, scenario 17).
    @usableFromInline
    final class Entry: @unchecked Sendable {
        /// The confirmed value, when `isKnown`.
        @usableFromInline @exclusivity(unchecked) var confirmed: StoredValue<Value>?
        /// Whether `confirmed` is the truth; when not, the levels hold it.
        @usableFromInline @exclusivity(unchecked) var isKnown = false
        @usableFromInline @exclusivity(unchecked) var pending = PendingChanges()
        /// The version of the last response published for the key.
        @usableFromInline @exclusivity(unchecked) var version = 0
        @usableFromInline @exclusivity(unchecked) var generation: Int
        @usableFromInline @exclusivity(unchecked) var confirmedVersion = 0
        @usableFromInline @exclusivity(unchecked) var observers = 0
        @usableFromInline @exclusivity(unchecked) var levelReads = 0
        /// Fetches in flight, oldest first.
        @usableFromInline @exclusivity(unchecked) var fetches: [Fetch] = []
        /// The id of the newest fetch whose value was confirmed.
        @usableFromInline @exclusivity(unchecked) var lastConfirmedFetch = 0
        /// Changes confirmed while fetches were in flight, to apply again to what they bring.
        @usableFromInline @exclusivity(unchecked) var log: [LoggedChange] = []
        /// When the newest change confirmed while no fetch was in flight was asked: it is not in `log`, so a fetch
        /// that begins later counts from after it (its value is newer than that change).
        @usableFromInline @exclusivity(unchecked) var lastUnlogged = 0
        /// When the change being applied now was asked, in the store's order (see ``StoreMachine/enqueue(_:on:)``).
        @usableFromInline @exclusivity(unchecked) var asking = 0
        /// Changes waiting for the one running (`isChanging`), in the order they were asked.
        @usableFromInline @exclusivity(unchecked) var queue: [Job] = []
        /// When each job of `queue` was asked, in the store's order.
        @usableFromInline @exclusivity(unchecked) var queueAsked: [Int] = []
        @usableFromInline @exclusivity(unchecked) var isChanging = false
        /// Whether the head of `queue` runs now, outside the lock (a ``Work``): it stays at the head until committed.
        @usableFromInline @exclusivity(unchecked) var headRuns = false
        /// Level operations decided and not yet issued, and whether a caller is issuing them.
        @usableFromInline @exclusivity(unchecked) var levelOps: [LevelOp] = []
        @usableFromInline @exclusivity(unchecked) var isIssuing = false
        /// Debounced writes waiting for their timer, by level.
        @usableFromInline @exclusivity(unchecked) var debounced: [Int: DebouncedWrite] = [:]
        /// Set while the entry counts among the kept values.
        @usableFromInline @exclusivity(unchecked) var keptStamp: Int?
        /// The subject the key's observers subscribe to, while it has observers.
        @usableFromInline @exclusivity(unchecked) var subject: Subject?
        /// Whether a fetch is owed to the observers once the fetch in flight ends: the key was invalidated after
        /// that fetch was sent.
        @usableFromInline @exclusivity(unchecked) var owesRefetch = false
        /// The stale mark of the invalidation that made a refetch owed, while one is.
        @usableFromInline var owedSince = 0
        /// Nonzero while the value is stale: the counter at its invalidation. A fetch started after it (a greater
        /// id), a write, an update or a confirmed optimistic change makes the value fresh.
        @usableFromInline @exclusivity(unchecked) var staleMark = 0
        /// Level saves issued and not landed yet: the entry is kept until they land (a save of a stale value is
        /// recorded stale when it lands, as the level stamps it with its own time; a save that fails keeps the
        /// value here).
        @usableFromInline @exclusivity(unchecked) var savesInFlight = 0
        /// The newest confirmed version a level failed to save, and the newest one a level saved (or a removal or
        /// a clear settled): while the first is newer, no level holds the value, and the store keeps it.
        @usableFromInline @exclusivity(unchecked) var failedVersion = 0
        @usableFromInline @exclusivity(unchecked) var savedVersion = 0
        /// The response a read answered at once last, and the `confirmedVersion` it was built from: the next such
        /// read of the same version shares it instead of building its own.
        @usableFromInline @exclusivity(unchecked) var hitResponse: StoreResponse<Value>?
        @usableFromInline @exclusivity(unchecked) var hitConfirmedVersion = 0
        /// The entry's key (for ``StoreMachine/entry(_:)``, which remembers the entry found last).
        @usableFromInline @exclusivity(unchecked) var key: Key

        @inlinable
        init(key: Key, generation: Int) {
            self.key = key
            self.generation = generation
        }

        /// Whether observers are shown a value: a known one, or pending changes.
        @inlinable
        var showsSomething: Bool { confirmed != nil || !pending.isEmpty }

        /// Whether nothing needs the entry: its value, if any, lives in the levels.
        @inlinable
        var isIdle: Bool {
            observers == 0 && levelReads == 0 && fetches.isEmpty && pending.isEmpty && queue.isEmpty && !isChanging
                && levelOps.isEmpty && !isIssuing && debounced.isEmpty && savesInFlight == 0
                && failedVersion <= savedVersion
        }
    }

    /// An optimistic change waiting for its commit.
    @usableFromInline
    struct Mutation: Sendable {
        @usableFromInline let id: Int
        @usableFromInline let change: Change
        @usableFromInline var commit: PendingLoad<Void>?
        /// Its place among the other changes of its queue (see ``MutationOrder``); `nil` for a change made alone.
        @usableFromInline let order: MutationOrder?

        @inlinable
        init(id: Int, change: @escaping Change, order: MutationOrder? = nil) {
            self.id = id
            self.change = change
            self.order = order
        }
    }

    /// A fetch in flight and the callers waiting for it.
    @usableFromInline
    struct Fetch: Sendable {
        @inlinable
        init(id: Int, generation: Int, logStart: Int, sentMark: Int, callers: InlineFirstArray<FetchCaller>) {
            self.id = id
            self.generation = generation
            self.logStart = logStart
            self.callers = callers
            self.sentMark = sentMark
        }

        @usableFromInline let id: Int
        @usableFromInline let generation: Int
        /// Logged changes with a greater sequence number were made after the fetch started.
        @usableFromInline let logStart: Int
        @usableFromInline var callers: InlineFirstArray<FetchCaller>
        @usableFromInline var token: (any CancellationToken)?
        /// Every caller left before the token was kept: the token is cancelled when it is.
        @usableFromInline var isAbandoned = false
        /// When its request went out, in the store's order: just after its caller was asked, or later for a fetch that
        /// waited for the network (`nil` while it waits). What it brings is fresh against the invalidations made
        /// before.
        @usableFromInline var sentMark: Int?

        /// Whether `change` was made while this fetch was in flight, in its generation: what the fetch brings gets it
        /// applied again.
        @inlinable
        func appliesAgain(_ change: LoggedChange) -> Bool {
            change.sequence > logStart && change.generation == generation
        }
    }

    /// Whether the levels are read for a key, or what the store knows answers instead (`nil`: a miss). Four words,
    /// as a snapshot is: the invalidations a hit is judged by are read from ``StoreMachine/staleRules(for:)`` under the same
    /// lock.
    @usableFromInline
    enum LevelRead {
        /// Read the level; a hit counts only when the level is `inStep` with the store.
        case read(ReadStamp, inStep: Bool)
        case known(Snapshot?)
    }

    /// How a caller's fetch begins (see ``StoreMachine/beginFetch(_:joining:since:completion:)``). Four words, as a
    /// snapshot is.
    @usableFromInline
    enum FetchStart {
        /// The caller begins fetch `fetch`, as its caller `caller`, and starts its upstream load.
        case starts(fetch: Int, caller: Int)
        /// The caller joined fetch `fetch` in flight, as its caller `caller`.
        case joined(fetch: Int, caller: Int)
        /// The store learned a value since the caller's read began: it is the answer, and no fetch begins.
        case answered(Snapshot)

        /// The fetch the caller waits for, and its id there (what leaving it takes); `nil` when answered.
        @inlinable
        var joinedFetch: (id: Int, caller: Int)? {
            switch self {
            case .starts(let fetch, let caller), .joined(let fetch, let caller): (fetch, caller)
            case .answered: nil
            }
        }

        /// Whether the caller starts the fetch's upstream load.
        @inlinable
        var starts: Bool {
            if case .starts = self { true } else { false }
        }
    }

    /// How a read of the last level that brought nothing ends (see
    /// ``StoreMachine/endLastLevelReadThenFetch(_:readAt:since:completion:)``).
    @usableFromInline
    enum LastLevelMiss {
        /// The store learned something since the level read began: what it shows is the answer (`nil`: nothing
        /// changed after all), and no fetch begins.
        case learned(Snapshot?)
        /// The read's fetch began.
        case fetch(FetchStart)
    }

    /// What a read finds when it first looks at its key (see ``StoreMachine/firstLook(_:under:now:)``).
    @usableFromInline
    enum FirstLook {
        /// The store's value answers as it is.
        case answer(StoreResponse<Value>)
        /// The store holds the key, but its value does not answer by itself.
        case held
        /// The store does not hold the key.
        case notHeld
    }

    /// A caller waiting for a fetch.
    @usableFromInline
    struct FetchCaller: Sendable {
        @inlinable
        init(id: Int, completion: @escaping FetchCompletion) {
            self.id = id
            self.completion = completion
        }

        @usableFromInline let id: Int
        @usableFromInline let completion: FetchCompletion
    }

    /// A change confirmed while fetches were in flight, numbered in order, with the generation of the key it was
    /// confirmed in: a fetch applies again only the changes of its own generation.
    @usableFromInline
    struct LoggedChange: Sendable {
        @inlinable
        init(sequence: Int, generation: Int, change: @escaping Change) {
            self.sequence = sequence
            self.generation = generation
            self.change = change
        }

        @usableFromInline let sequence: Int
        @usableFromInline let generation: Int
        @usableFromInline let change: Change
    }

    /// A key that fell out of use with a value, and the stamp it was kept with.
    @usableFromInline
    struct KeptRecord: Sendable {
        @inlinable
        init(key: Key, stamp: Int) {
            self.key = key
            self.stamp = stamp
        }

        @usableFromInline let key: Key
        @usableFromInline let stamp: Int
    }

    /// What a fetch's caller receives.
    @usableFromInline
    struct FetchReply: Sendable {
        @inlinable
        init(completion: @escaping FetchCompletion, result: Result<Snapshot, any Error>) {
            self.completion = completion
            self.result = result
        }

        @usableFromInline let completion: FetchCompletion
        @usableFromInline let result: Result<Snapshot, any Error>
    }

    /// Work that waits for level writes to finish: the answers of a fetch, the completion of a confirmed optimistic
    /// change or of a flush. A level operation that carries a ticket holds it until it is issued, and each level
    /// write issued for it holds it until the write completes; the work runs, once, when the last hold is released.
    /// A value whose copies share one locked state (one allocation).
    @usableFromInline
    struct SaveTicket: Sendable {
        @usableFromInline
        enum Work: Sendable {
            case replies(InlineFirstArray<FetchReply>)
            case run(@Sendable () -> Void)
        }

        /// What a level write reports its failure to (the store's `onWriteFailure`). In a struct, so that the locked state
        /// holding it is stored as it is: a bare closure in a generic box is converted to another calling form on
        /// each access, which allocates.
        @usableFromInline
        struct Report: Sendable {
            @usableFromInline let call: @Sendable (Result<Void, any Error>) -> Void

            @inlinable
            init(_ call: @escaping @Sendable (Result<Void, any Error>) -> Void) {
                self.call = call
            }
        }

        @usableFromInline let state: Locked<(holds: Int, work: Work?, report: Report?)>

        /// A ticket with one hold (its maker's, or the level operation's it is made for).
        @inlinable
        init(_ work: Work? = nil) {
            state = Locked((1, work, nil))
        }

        /// Sets the work to run once every hold is released; only before the ticket's first release.
        @inlinable
        func whenSaved(_ work: consuming Work) {
            var work = Optional(work)
            state.withLock { $0.work = work.take() }  // moved in, not copied
        }

        @inlinable
        func hold() {
            state.withLock { $0.holds += 1 }
        }

        /// Holds the ticket for a level write, which calls ``landed(_:)`` when it completes; a failure is reported to
        /// `report` (the ticket keeps the first it is given, so that the write's completion needs to capture nothing
        /// else).
        @inlinable
        func hold(reportingTo report: Report) {
            state.withLock { state in
                state.holds += 1
                if state.report == nil { state.report = report }
            }
        }

        /// A level write holding the ticket completed: its failure is reported, then its hold released.
        @inlinable
        func landed(_ result: Result<Void, any Error>) {
            if case .failure = result, let report = state.withLock({ $0.report }) { report.call(result) }
            release()
        }

        /// Releases a hold; the last runs the work (here, after unlocking).
        @inlinable
        func release() {
            let work = state.withLock { state -> Work? in
                state.holds -= 1
                guard state.holds == 0 else { return nil }
                return state.work.take()  // moved out, not copied
            }
            switch consume work {
            case .replies(let replies):
                if let first = replies.head { first.completion(first.result) }
                for reply in replies.tail { reply.completion(reply.result) }
            case .run(let run): run()
            case nil: break
            }
        }
    }

    /// What a level read's caller receives.
    @usableFromInline
    struct HitReplyDelivery {
        @inlinable
        init(reply: @escaping HitReply, snapshot: Snapshot) {
            self.reply = reply
            self.snapshot = snapshot
        }

        @usableFromInline let reply: HitReply
        @usableFromInline let snapshot: Snapshot
    }

    /// A debounced write whose timer the store starts.
    @usableFromInline
    struct DebounceStart {
        @inlinable
        init(level: Int, id: Int, value: Value) {
            self.level = level
            self.id = id
            self.value = value
        }

        @usableFromInline let level: Int
        @usableFromInline let id: Int
        @usableFromInline let value: Value
    }

    /// What a level read knew of its key when it started.
    @usableFromInline
    struct ReadStamp: Sendable {
        @inlinable
        init(generation: Int, confirmedVersion: Int, staleMark: Int) {
            self.generation = generation
            self.confirmedVersion = confirmedVersion
            self.staleMark = staleMark
        }

        @usableFromInline let generation: Int
        @usableFromInline let confirmedVersion: Int
        /// The entry's stale mark: one that changed while the level was read is an invalidation that matched the key.
        @usableFromInline let staleMark: Int
    }

    /// An invalidation of the keys `matches` accepts, made at `date`, as the store's `generation` counted then.
    @usableFromInline
    struct Invalidation: Sendable {
        @inlinable
        init(date: Date, generation: Int, matches: @escaping @Sendable (Key) -> Bool) {
            self.date = date
            self.generation = generation
            self.matches = matches
        }

        @usableFromInline let date: Date
        @usableFromInline let generation: Int
        @usableFromInline let matches: @Sendable (Key) -> Bool
    }

    /// Everything saved before a point is stale: an invalidation of every key, or old records folded.
    @usableFromInline
    struct StaleBefore: Sendable {
        @usableFromInline let date: Date
        @usableFromInline let generation: Int

        @inlinable
        init(date: Date, generation: Int) {
            self.date = date
            self.generation = generation
        }

        /// This point or `other`, whichever is later by both measures.
        @inlinable
        func merged(with other: StaleBefore?) -> StaleBefore {
            guard let other else { return self }
            return StaleBefore(date: max(date, other.date), generation: max(generation, other.generation))
        }
    }

    /// The invalidations a reader judges one key's level value by, outside the lock (a predicate is the caller's
    /// code), with when the store itself last confirmed a fresh value of the key (`refreshedAt`, in its order).
    @usableFromInline
    struct StaleRules: Sendable {
        @inlinable
        init(staleBefore: StaleBefore?, invalidations: [Invalidation], refreshedAt: Int?) {
            self.staleBefore = staleBefore
            self.invalidations = invalidations
            self.refreshedAt = refreshedAt
        }

        @usableFromInline let staleBefore: StaleBefore?
        @usableFromInline let invalidations: [Invalidation]
        @usableFromInline let refreshedAt: Int?

        /// Whether `key`'s value saved at `savedAt` was invalidated since. A value the store confirmed fresh after an
        /// invalidation (a fetch sent after it, a write) is not stale by it, whatever the clock said when it was
        /// saved (it may have been set back); a value someone else saved is judged by its date.
        @inlinable
        func isStale(_ key: Key, savedAt: Date) -> Bool {
            staleSince(key, savedAt: savedAt) != nil
        }

        /// The place in the store's order of the latest invalidation that judges `key`'s value saved at `savedAt`
        /// stale (a fetch sent after it makes the value fresh again); `nil` when none does.
        @inlinable
        func staleSince(_ key: Key, savedAt: Date) -> Int? {
            var since: Int?
            if let staleBefore, !refreshed(since: staleBefore.generation), savedAt <= staleBefore.date {
                since = staleBefore.generation
            }
            // Records are not in the order of their places (a stale save's record takes its invalidation's).
            for invalidation in invalidations where since.map({ $0 < invalidation.generation }) ?? true {
                if !refreshed(since: invalidation.generation), savedAt <= invalidation.date,
                    invalidation.matches(key)
                {
                    since = invalidation.generation
                }
            }
            return since
        }

        @inlinable
        func refreshed(since generation: Int) -> Bool {
            refreshedAt.map { $0 > generation } ?? false
        }
    }

    /// A change of a key's confirmed value, queued per key.
    @usableFromInline
    enum Job: Sendable {
        /// A value written (a live update, a local edit).
        case write(StoredValue<Value>)
        /// A transform of the confirmed value. With a `reply`, the transform adds what the network brought (a page
        /// appended to a list): its result is the network's, written to every level at once (debounced ones too),
        /// and `reply` receives what the key shows once it is saved (a failure when a removal or a clear drops it).
        case update(Change, reply: FetchCompletion?)
        /// What fetch `fetch` brought.
        case fetched(Value, fetch: Int)
        /// What level `level` held, read under `stamp` (`stale` when invalidated since it was saved), shown with
        /// `error` attached (the failure of the fetch it stands in for); `reply` receives the answer of the read.
        case hit(
            CachedValue<Value>, level: Int, stamp: ReadStamp, staleSince: Int?, error: (any Error)?, reply: HitReply)
        /// An optimistic change's commit finished (or was cancelled); `ticket` is released once the change is
        /// saved to the levels (at once when it is not confirmed).
        case settle(mutation: Int, accepted: Bool, ticket: SaveTicket?)
        /// Nothing but making the key known (an optimistic change shown over the levels' value).
        case load
        /// Write the key's debounced writes now; `ticket` is released once they are saved.
        case flush(SaveTicket)
        /// A read waiting for the changes asked before it: `reply` is called when its turn comes (the read then
        /// answers with what they made).
        case barrier(reply: @Sendable () -> Void)
        /// An optimistic change asked while the key's changes run or wait: shown when its turn comes, after them.
        case add(Mutation)

        /// Whether the job applies a change to the confirmed value, which must be read from the levels first
        /// when the key is not known.
        @inlinable
        var needsBase: Bool {
            switch self {
            case .update, .load, .settle(_, accepted: true, _): true
            case .write, .fetched, .hit, .settle, .flush, .barrier, .add: false
            }
        }

        /// The value the job's changes apply to.
        @inlinable
        func base(in entry: Entry) -> Value? {
            switch self {
            case .write(let stored): stored.value
            case .fetched(let value, _): value
            case .hit(let cached, _, _, _, _, _): cached.value
            case .update, .settle, .load, .flush, .barrier, .add: entry.confirmed?.value
            }
        }

        /// The closures to run outside the lock on ``base(in:)``; `nil` when there are none.
        @inlinable
        func changes(in entry: Entry) -> [Change]? {
            switch self {
            case .update(let change, _):
                return [change]
            case .settle(let id, accepted: true, _):
                return entry.pending.mutation(id).map { [$0.change] }
            case .fetched(_, let id):
                guard let fetch = entry.fetches.first(where: { $0.id == id }) else { return nil }
                let changes = entry.log.filter(fetch.appliesAgain).map { $0.change }
                return changes.isEmpty ? nil : changes
            case .write, .hit, .settle, .load, .flush, .barrier, .add:
                return nil
            }
        }

        /// The answer of a job a removal or a clear dropped unapplied, when it has a caller waiting.
        @inlinable
        var droppedReply: FetchReply? {
            guard case .update(_, let reply?) = self else { return nil }
            return FetchReply(completion: reply, result: .failure(StoreError.discarded))
        }

        /// Whether a removal or a clear drops the job unapplied (it was asked before them); the others are
        /// judged stale when they run, and answer their callers. A clear drops an optimistic change waiting to be
        /// shown too (``added``); a removal keeps it, as it keeps those shown.
        @inlinable
        var isDroppedByRemoval: Bool {
            switch self {
            case .write, .update, .load: true
            case .fetched, .hit, .settle, .flush, .barrier, .add: false
            }
        }

        /// The optimistic change the job shows, if it is one.
        @inlinable
        var added: Mutation? {
            guard case .add(let mutation) = self else { return nil }
            return mutation
        }
    }

    /// Closures to run outside the lock, on `base`, for the change at the head of a key's queue.
    @usableFromInline
    struct Work: Sendable {
        @inlinable
        init(generation: Int, base: Value?, changes: [Change]) {
            self.generation = generation
            self.base = base
            self.changes = changes
        }

        @usableFromInline let generation: Int
        @usableFromInline let base: Value?
        @usableFromInline let changes: [Change]

        /// The changes applied in order.
        @inlinable
        func run() -> Value? {
            changes.reduce(base) { value, change in change(value) }
        }
    }

    /// What the caller that submitted a change (or finished one) does next.
    @usableFromInline
    enum Step {
        /// The change was applied: perform the effects, then ask for the next step.
        case applied(Effects)
        /// Run the work outside the lock, then commit its result.
        case run(Work)
        /// Read the levels for the key's value, then commit it as the base.
        case loadBase(generation: Int)
        /// Another caller runs the key's changes: nothing to do.
        case queued
    }

    /// A write or removal for a key's levels, with the ticket it holds (work waiting for it to be saved).
    @usableFromInline
    enum LevelOp: Sendable {
        /// Save to the levels of the range; when `skipsDebounced`, not to the debounced ones (they are written when
        /// their timers fire).
        case save(Value, levels: Range<Int>, skipsDebounced: Bool, ticket: SaveTicket?, mark: SaveMark)
        /// A debounced level's write, once its timer fired or a flush asked for it.
        case flush(Value, level: Int, ticket: SaveTicket?, mark: SaveMark)
        /// Remove the key from every level; a removal no level could make is kept as a failed save is.
        case remove(ticket: SaveTicket?, mark: SaveMark)

        @inlinable
        var ticket: SaveTicket? {
            switch self {
            case .save(_, _, _, let ticket, _), .flush(_, _, let ticket, _), .remove(let ticket, _): ticket
            }
        }
    }

    /// What a save reports when it lands: which value it was (the entry's generation and confirmed version), and when
    /// that value went stale (`staleSince`, the entry's stale mark; zero when fresh): it is recorded stale once
    /// saved, as the level stamps it with its own time.
    @usableFromInline
    struct SaveMark: Sendable {
        @usableFromInline let generation: Int
        @usableFromInline let version: Int
        @usableFromInline let staleSince: Int

        @inlinable
        init(generation: Int, version: Int, staleSince: Int) {
            self.generation = generation
            self.version = version
            self.staleSince = staleSince
        }

        /// Whether the value saved was stale.
        @inlinable
        var stale: Bool { staleSince != 0 }
    }

    @usableFromInline
    struct DebouncedWrite: Sendable {
        @inlinable
        init(id: Int, value: Value, mark: SaveMark, timer: any CancellationToken) {
            self.id = id
            self.value = value
            self.mark = mark
            self.timer = timer
        }

        @usableFromInline let id: Int
        @usableFromInline let value: Value
        @usableFromInline let mark: SaveMark
        @usableFromInline var timer: any CancellationToken
    }

    /// A clear whose `removeAll` is not issued yet.
    @usableFromInline
    struct Clearing: Sendable {
        @inlinable
        init() {}

        @usableFromInline var completions: [@Sendable () -> Void] = []
        /// Whether a caller was told to issue the `removeAll`.
        @usableFromInline var isAssigned = false
    }

    /// What the store performs after unlocking, in this order: release the garbage, cancel, fail the cleared
    /// commits, publish, schedule the debounced writes, issue the level operations, reply, release the tickets.
    @usableFromInline
    struct Effects {
        @inlinable
        init(
            publish: Snapshot? = nil, fetchReplies: [FetchReply] = [], hitReplies: [HitReplyDelivery] = [],
            garbage: [Any] = [], released: [SaveTicket] = []
        ) {
            published = publish
            if !fetchReplies.isEmpty || !hitReplies.isEmpty || !garbage.isEmpty || !released.isEmpty {
                more = More()
                more!.fetchReplies = fetchReplies
                more!.hitReplies = hitReplies
                more!.garbage = garbage
                more!.released = released
            }
        }

        /// The first snapshot to publish, and the others after it, in order. Most effects publish one: it needs no
        /// array.
        @usableFromInline var published: Snapshot?
        @usableFromInline var publishedLater: [Snapshot] = []
        /// The confirmed value a change replaced, released after unlocking.
        @usableFromInline var replaced: StoredValue<Value>?
        /// Whether the caller issues the key's level operations (see ``StoreMachine/takeLevelOps(of:)``).
        @usableFromInline var issueLevels = false
        /// Whether the caller issues a clear's `removeAll`.
        @usableFromInline var removeAll = false
        /// Whether the caller's turn of running the key's changes is over (its queue was empty): it performs these
        /// effects and stops, without asking for the next change.
        @usableFromInline var endsTurn = false
        /// The refetch of the key the machine began for its observers (owed by a fetch that ended), whose upstream
        /// load the caller starts; zero when none.
        @usableFromInline var refetches = 0
        /// The effects a plain write has none of, kept apart so that effects stay small to copy and destroy.
        @usableFromInline var more: More?

        /// The effects a plain write has none of.
        @usableFromInline
        final class More {
            @usableFromInline var fetchReplies: [FetchReply] = []
            @usableFromInline var hitReplies: [HitReplyDelivery] = []
            @usableFromInline var garbage: [Any] = []
            @usableFromInline var cancels: [any CancellationToken] = []
            @usableFromInline var failedCommits: [PendingLoad<Void>] = []
            @usableFromInline var debounce: [DebounceStart] = []
            /// Tickets to release last (work that waited for saves that were dropped or not needed).
            @usableFromInline var released: [SaveTicket] = []

            @inlinable
            init() {}

            @inlinable
            func copy() -> More {
                let copy = More()
                copy.fetchReplies = fetchReplies
                copy.hitReplies = hitReplies
                copy.garbage = garbage
                copy.cancels = cancels
                copy.failedCommits = failedCommits
                copy.debounce = debounce
                copy.released = released
                return copy
            }
        }

        /// Adds `snapshot` to publish, after the others (nothing when `nil`: no observer, no reply).
        @inlinable
        mutating func publish(_ snapshot: consuming Snapshot?) {
            guard let snapshot else { return }
            if published == nil { published = snapshot } else { publishedLater.append(snapshot) }
        }

        /// The snapshot published last (effects that answer a caller: see ``StoreMachine/publish(_:error:answers:)``).
        @inlinable
        var lastPublished: Snapshot {
            publishedLater.isEmpty ? published! : publishedLater[publishedLater.count - 1]
        }

        /// ``more``, made and not shared with another copy of these effects, to change. The lists below are changed
        /// in place there (an append in a loop, as a clear makes, copies nothing).
        @inlinable
        mutating func uniqueMore() -> More {
            if more == nil {
                more = More()
            } else if !isKnownUniquelyReferenced(&more!) {
                more = more!.copy()
            }
            return more!
        }

        @inlinable var fetchReplies: [FetchReply] {
            get { more?.fetchReplies ?? [] }
            _modify { yield &uniqueMore().fetchReplies }
        }
        @inlinable var hitReplies: [HitReplyDelivery] {
            get { more?.hitReplies ?? [] }
            _modify { yield &uniqueMore().hitReplies }
        }
        @inlinable var garbage: [Any] {
            get { more?.garbage ?? [] }
            _modify { yield &uniqueMore().garbage }
        }
        @inlinable var cancels: [any CancellationToken] {
            get { more?.cancels ?? [] }
            _modify { yield &uniqueMore().cancels }
        }
        @inlinable var failedCommits: [PendingLoad<Void>] {
            get { more?.failedCommits ?? [] }
            _modify { yield &uniqueMore().failedCommits }
        }
        @inlinable var debounce: [DebounceStart] {
            get { more?.debounce ?? [] }
            _modify { yield &uniqueMore().debounce }
        }
        @inlinable var released: [SaveTicket] {
            get { more?.released ?? [] }
            _modify { yield &uniqueMore().released }
        }
    }

    /// What a key shows at one version, captured under the lock: the confirmed value as a response (built there,
    /// which runs no code of the caller's: the value is retained, not copied), and the pending changes, which are the
    /// caller's closures and are applied outside the lock (``response``). Four words, so that it is copied and
    /// destroyed in place: a larger value crossing the machine's boundary is copied through its type's value
    /// witnesses, even where the store's code is specialized.
    @usableFromInline
    struct Snapshot: Sendable {
        /// The confirmed value at the snapshot's version (no value when none is confirmed), with the error attached.
        @usableFromInline let confirmed: StoreResponse<Value>
        /// The optimistic changes shown over it, when there are some.
        @usableFromInline let pending: ShownChanges?
        /// The key's subject when it has observers: where the snapshot is published.
        @usableFromInline let subject: Subject?
        /// Whether the confirmed value was invalidated and not fetched anew since.
        @usableFromInline let isStale: Bool

        @inlinable
        init(entry: Entry, version: Int, error: (any Error)? = nil) {
            let value = entry.confirmed
            confirmed = StoreResponse(
                value: value?.value, origin: value?.origin ?? .local, savedAtSeconds: value?.savedAtSeconds,
                hasPendingChanges: false, error: error, version: version)
            pending = entry.pending.isEmpty ? nil : ShownChanges(entry: entry)
            subject = entry.subject
            isStale = entry.staleMark != 0
        }

        /// The version observers are shown.
        @inlinable
        var version: Int { confirmed.version }

        /// What observers and readers are shown: the confirmed value, with the pending changes applied in order
        /// (from the prefix the key showed last, when it still holds).
        @inlinable
        var response: StoreResponse<Value> {
            guard let pending else { return confirmed }
            let start = pending.prefix.map { $0.value } ?? confirmed.value
            return StoreResponse(
                value: pending.rest.reduce(start) { value, mutation in mutation.change(value) },
                origin: .local, savedAtSeconds: confirmed.storage.savedAtSeconds, hasPendingChanges: true,
                error: confirmed.error, version: confirmed.version)
        }

        /// What the key shows with every pending change, as a prefix the key remembers (see
        /// ``StoreMachine/remember(_:for:)``); `nil` when nothing new was applied.
        @inlinable
        func shownPrefix(_ response: StoreResponse<Value>) -> (key: Key, prefix: ShownPrefix)? {
            guard let pending, !pending.rest.isEmpty else { return nil }
            return (
                pending.key,
                ShownPrefix(
                    confirmedVersion: pending.confirmedVersion, epoch: pending.epoch,
                    count: (pending.prefix?.count ?? 0) + pending.rest.count, value: response.value)
            )
        }
    }

    /// The pending changes a snapshot shows: the prefix the key showed last, if it still holds, and the changes after
    /// it, with what identifies the list they come from.
    @usableFromInline
    final class ShownChanges: Sendable {
        @usableFromInline let key: Key
        @usableFromInline let prefix: ShownPrefix?
        @usableFromInline let rest: [Mutation]
        @usableFromInline let confirmedVersion: Int
        @usableFromInline let epoch: Int

        @inlinable
        init(entry: Entry) {
            key = entry.key
            confirmedVersion = entry.confirmedVersion
            epoch = entry.pending.epoch
            (prefix, rest) = entry.pending.start(confirmedVersion: confirmedVersion)
        }
    }
}

extension Array {
    /// The elements that satisfy `belongs`, and the others, each in their order.
    @inlinable
    func partitioned(by belongs: (Element) -> Bool) -> (matching: [Element], others: [Element]) {
        var matching: [Element] = []
        var others: [Element] = []
        for element in self {
            if belongs(element) { matching.append(element) } else { others.append(element) }
        }
        return (matching, others)
    }
}

/// What a ``StoreMachine`` let go of under the store's lock, to be released after unlocking: dropped entries and a
/// replaced response's storage, as plain references. It is not nested in the generic machine, so that moving it
/// costs no metadata look-up where the store runs unspecialized. One entry and one response need no allocation;
/// more entries (a clear, evictions) go to an array.
@usableFromInline
struct StoreReleased: Sendable {
    @usableFromInline var entry: (any AnyObject & Sendable)?
    @usableFromInline var entries: [any AnyObject & Sendable] = []
    @usableFromInline var response: (any AnyObject & Sendable)?

    @inlinable
    init() {}

    @inlinable
    var isEmpty: Bool { entry == nil && response == nil && entries.isEmpty }

    @inlinable
    mutating func add(_ dropped: any AnyObject & Sendable) {
        if entry == nil { entry = dropped } else { entries.append(dropped) }
    }
}
