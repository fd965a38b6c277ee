#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// The next level operations of `key`, for the caller issuing them. `nil` when there are none: the caller
    /// stops, unless `removeAll` is set (it then issues a clear's `removeAll`).
    mutating func takeLevelOps(of key: Key) -> (ops: InlineFirstArray<LevelOp>, removeAll: Bool)? {
        guard let entry = entry(key) else { return nil }
        if !issuing.isClearing, entry.work.writes.hasOps {
            return (entry.work.takeLevelOps(spare: &spareOps, debounced: debouncedLevels), false)
        }
        entry.work.writes.stopIssuing()
        let issuesRemoveAll = issuing.stop(key, hasMore: entry.work.writes.hasOps)
        release(key)
        return issuesRemoveAll ? (InlineFirstArray(), true) : nil
    }

    /// A debounced write's timer is running: keeps its token; returns it when the write was dropped meanwhile.
    mutating func keepTimer(
        _ timer: any CancellationToken, ofWrite id: Int, level: Int, for key: Key
    ) -> (any CancellationToken)? {
        guard let entry = entry(key), entry.work.writes.keepTimer(timer, ofWrite: id, level: level) else {
            return timer
        }
        return nil
    }

    /// A debounced write's timer fired: the write is issued if it is still the level's latest.
    mutating func debounceFired(_ id: Int, level: Int, for key: Key) -> Effects {
        guard let entry = entry(key), let timer = entry.work.writes.fire(id, level: level) else { return Effects() }
        var effects = Effects(garbage: [timer])
        effects.issueLevels = startIssuing(key)
        release(key)
        return effects
    }

    /// A flush's wait reached the caller issuing `key`'s operations, which issued (and counted) those decided before
    /// it: `ticket` waits for the key's saves in flight; `false` when none is (the caller releases it).
    mutating func flushWaits(_ ticket: SaveTicket, for key: Key) -> Bool {
        entry(key, heldBecause: "a caller is issuing the key's level operations").work.saves.whenLanded(ticket)
    }

    /// Decides `operation` for `entry`'s key, after those decided before (the list's storage, when it has none,
    /// is the one the last key's operations left: see ``LevelWrites/giveStorage(to:)``).
    mutating func decide(_ operation: consuming LevelOp, for entry: Entry) {
        entry.work.decide(operation, spare: &spareOps)
    }

    /// Whether the caller that decided level operations for `key` issues them: not when another caller is issuing
    /// the key's operations already, or a clear holds them until its `removeAll` is issued.
    mutating func startIssuing(_ key: Key) -> Bool {
        let entry = entry(key, heldBecause: "the caller just decided its level operations")
        guard entry.work.writes.hasOps, !entry.work.writes.isIssuing, issuing.start(key) else { return false }
        entry.work.writes.startIssuing()
        return true
    }
}

extension StoreMachine {
    /// A write or removal for a key's levels, with the ticket it holds (work waiting for it to be saved). The ticket
    /// of a fetch's answer (`answersFetch`) is not held by the levels that save in the background.
    enum LevelOp: Sendable {
        /// Save to the levels of the range, dated `savedAt` (seconds since the reference date: when the store learned
        /// the value); when `skipsDebounced`, not to the debounced ones (they are written when their timers fire).
        case save(
            Value, savedAt: Double, levels: Range<Int>, skipsDebounced: Bool, ticket: SaveTicket?, answersFetch: Bool,
            mark: SaveMark)
        /// A debounced level's write, once its timer fired or a flush asked for it.
        case flush(Value, savedAt: Double, level: Int, ticket: SaveTicket?, mark: SaveMark)
        /// Remove the key from the levels of the range (every level, unless the removal is what another process
        /// made in a level they share: then the faster ones); a removal no level could make is kept as a failed save
        /// is.
        case remove(levels: Range<Int>, ticket: SaveTicket?, answersFetch: Bool = false, mark: SaveMark)
        /// A flush's wait: once the operations decided before it are issued, its ticket waits for the key's saves in
        /// flight (see ``StoreMachine/flushWaits(_:for:)``).
        case waitForSaves(ticket: SaveTicket)

        /// Whether it waits for its place in the processes' order (see ``SaveMark/wanted``).
        var wantsPlace: Bool {
            switch self {
            case .save(_, _, _, _, _, _, let mark), .remove(_, _, _, let mark): mark.place == SaveMark.wanted
            case .flush, .waitForSaves: false
            }
        }

        /// Gives the operation its place in the processes' order (see ``SaveMark/wanted``).
        mutating func place(at place: UInt64) {
            switch self {
            case .save(let value, let savedAt, let levels, let skipsDebounced, let ticket, let answersFetch, var mark):
                mark.place = place
                self = .save(
                    value, savedAt: savedAt, levels: levels, skipsDebounced: skipsDebounced, ticket: ticket,
                    answersFetch: answersFetch, mark: mark)
            case .remove(let levels, let ticket, let answersFetch, var mark):
                mark.place = place
                self = .remove(levels: levels, ticket: ticket, answersFetch: answersFetch, mark: mark)
            case .flush, .waitForSaves: break
            }
        }

        /// Whether it saves or removes the key (not a debounced level's write, nor a flush's wait).
        var changesLevels: Bool {
            switch self {
            case .save, .remove: true
            case .flush, .waitForSaves: false
            }
        }

        /// Whether it is a flush's wait.
        var isFlushWait: Bool {
            if case .waitForSaves = self { true } else { false }
        }

        /// Whether it saves or removes the key in the shared level at a place in the processes' order after `order`.
        func isPlaced(after order: UInt64) -> Bool {
            switch self {
            case .save(_, _, _, _, _, _, let mark), .remove(_, _, _, let mark):
                mark.givenPlace.map { $0 > order } ?? false
            case .flush, .waitForSaves: false
            }
        }

        var ticket: SaveTicket? {
            switch self {
            case .save(_, _, _, _, let ticket, _, _), .remove(_, let ticket, _, _): ticket
            case .flush(_, _, _, let ticket, _): ticket
            case .waitForSaves(let ticket): ticket
            }
        }
    }

    /// What a save reports when it lands: which value it was (the entry's generation and confirmed version), and when
    /// that value went stale (`staleSince`, the entry's stale mark; zero when fresh): it is recorded stale once
    /// saved, as a level may stamp it with its own time (a cache that does not keep the date the store gives).
    ///
    /// A save or removal of the level the store shares with other processes also carries its `place` in the
    /// processes' order, taken when the store made the change (see ``StoreMachine/placesWanted``): ``wanted`` until
    /// the store gives it, before unlocking; ``unplaced`` when it takes one as it is issued (a debounced write's, or
    /// when the journal could not give one then).
    struct SaveMark: Sendable {
        let generation: Int
        let version: Int
        let staleSince: Int
        var place: UInt64

        /// The place of a change that has none yet, and is given one before the store unlocks.
        static let wanted = UInt64.max
        /// The place of a change that takes one when its save is issued.
        static let unplaced: UInt64 = 0

        init(generation: Int, version: Int, staleSince: Int, place: UInt64 = unplaced) {
            self.generation = generation
            self.version = version
            self.staleSince = staleSince
            self.place = place
        }

        /// Whether the value saved was stale.
        var stale: Bool { staleSince != 0 }

        /// The place the store gave the change, if it gave one.
        var givenPlace: UInt64? { place == Self.unplaced || place == Self.wanted ? nil : place }
    }

    struct DebouncedWrite: Sendable {
        let id: Int
        let value: Value
        /// When the store learned the value (seconds since the reference date).
        let savedAt: Double
        let mark: SaveMark
        var timer: any CancellationToken
    }

    /// A debounced write whose timer the store starts.
    struct DebounceStart {
        let level: Int
        let id: Int
        let value: Value
    }

    /// Work that waits for level writes to finish: the answers of a fetch, the completion of a confirmed optimistic
    /// change or of a flush. A level operation that carries a ticket holds it until it is issued, and each level
    /// write issued for it holds it until the write completes; the work runs, once, when the last hold is released.
    /// A value whose copies share one locked state (one allocation).
    struct SaveTicket: Sendable {
        enum Work: Sendable {
            case replies(InlineFirstArray<FetchReply>)
            case run(@Sendable () -> Void)
        }

        /// What a level write reports its failure to (the store's `onWriteFailure`). In a struct, so that the locked state
        /// holding it is stored as it is: a bare closure in a generic box is converted to another calling form on
        /// each access, which allocates.
        struct Report: Sendable {
            let call: @Sendable (Result<Void, any Error>) -> Void

            init(_ call: @escaping @Sendable (Result<Void, any Error>) -> Void) {
                self.call = call
            }
        }

        /// Where the writes of the one operation holding a ticket tell that they landed: the store, the key and what
        /// the operation saves. Kept in the ticket, so that a write's completion captures the ticket alone and needs
        /// no storage of its own.
        struct Landing: Sendable {
            let engine: StoreEngine
            let key: StoreKeyRef
            let mark: SaveMark
        }

        /// What the ticket's copies share. A named struct rather than a tuple: the lock box is freed through its
        /// state's value witness, which a struct has compiled and a tuple runs field by field through the fields'
        /// metadata (about 180 instructions more a ticket: a fetch's, an awaited change's).
        struct State: Sendable {
            var holds = 1
            var work: Work?
            var report: Report?
            var landing: Landing?
        }

        private let state: Locked<State>

        /// A ticket with one hold (its maker's, or the level operation's it is made for).
        init(_ work: Work? = nil) {
            state = Locked(State(work: work))
        }

        /// Sets the work to run once every hold is released; only before the ticket's first release.
        func whenSaved(_ work: consuming Work) {
            var work = Optional(work)
            state.withLock { $0.work = work.take() }  // moved in, not copied
        }

        func hold() {
            state.withLock { $0.holds += 1 }
        }

        /// Holds the ticket for a level write, which calls ``landed(_:)`` when it completes; a failure is reported to
        /// `report` (the ticket keeps the first it is given, so that the write's completion needs to capture nothing
        /// else). The writes of a save or a removal, whose ticket is theirs alone, pass where they land (`landing`):
        /// ``landed(_:)`` tells it first.
        func hold(reportingTo report: Report, landing: Landing? = nil) {
            state.withLock { state in
                state.holds += 1
                if state.report == nil { state.report = report }
                if state.landing == nil { state.landing = landing }
            }
        }

        /// A level write holding the ticket completed: the store is told it landed (when the ticket holds where its
        /// writes land), its failure is reported, then its hold released.
        func landed(_ result: Result<Void, any Error>) {
            let flushed =
                state.withLock { $0.landing }.map { $0.engine.saveLanded(of: $0.key, mark: $0.mark, result: result) }
            if case .failure = result, let report = state.withLock({ $0.report }) { report.call(result) }
            release()
            for flush in flushed ?? [] { flush.release() }  // a flush that waited for this save, after unlocking
        }

        /// Releases a hold; the last runs the work (here, after unlocking).
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

    /// What a fetch's caller receives.
    struct FetchReply: Sendable {
        init(completion: @escaping FetchCompletion, result: Result<Snapshot, any Error>) {
            self.completion = completion
            self.result = result
        }

        let completion: FetchCompletion
        let result: Result<Snapshot, any Error>
    }
}
