#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's level operations: the machine's events that decide, hand out and land them, what they carry (the save's
// ticket, its mark), then the parts that keep them: writes not issued yet (`LevelWrites`), saves in
// flight (`LevelSaves`), and who issues them while a clear waits (`LevelIssuing`).

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

extension StoreMachine {
    /// A key's level writes not issued yet: the operations decided, in the order the changes that decided them were
    /// made, whether a caller is issuing them (one at a time, see ``LevelIssuing``), and the debounced writes waiting
    /// for their timers, one per level (a newer write replaces the one waiting). While any of these is there, a level
    /// read of the key is behind what the store confirmed.
    ///
    /// A debounced level gets one save of the key at a time: a write whose timer ends while the level still saves an
    /// earlier one waits for it to land (replaced meanwhile by any newer write), so that a slow level saves the latest
    /// value next instead of every value in between.
    struct LevelWrites: Sendable {
        /// None inline: every entry keeps its level writes, and an operation is about a hundred bytes. The storage
        /// goes back to the machine once they are issued (``giveStorage(to:)``), for the next key's operations.
        private var ops: [LevelOp] = []
        /// Whether a caller is issuing the key's operations.
        private(set) var isIssuing = false
        private var debounced: [Int: DebouncedWrite] = [:]
        /// The debounced levels' saves of the key on their way, by level.
        private var saving: [Int: Int] = [:]
        /// The debounced levels whose write's timer ended while a save was on its way: it is issued when that lands.
        private var due: Set<Int> = []

        /// Whether nothing waits: no operation, no caller issuing, no debounced write.
        var isSettled: Bool { ops.isEmpty && !isIssuing && debounced.isEmpty }

        /// Whether operations wait to be issued.
        var hasOps: Bool { !ops.isEmpty }

        /// Whether debounced writes wait for their timers.
        var hasDebounced: Bool { !debounced.isEmpty }

        /// Whether `level` may not hold what the store confirmed yet: a write for it waits or is being issued.
        func isBehind(at level: Int) -> Bool {
            debounced[level] != nil || !ops.isEmpty || isIssuing
        }

        /// Decides one more operation, issued after those decided before.
        mutating func append(_ operation: consuming LevelOp) {
            ops.append(operation)
        }

        /// Gives the first operation waiting for its place in the processes' order that place (see
        /// ``SaveMark/wanted``), if one waits.
        mutating func place(at place: UInt64) {
            if let index = ops.firstIndex(where: { $0.wantsPlace }) { ops[index].place(at: place) }
        }

        /// Takes every operation waiting, in order, for the caller issuing them. A single one is taken alone (the
        /// list keeps its storage, for ``giveStorage(to:)``).
        mutating func takeOps() -> InlineFirstArray<LevelOp> {
            guard ops.count > 1 else { return InlineFirstArray(head: ops.popLast()) }
            return InlineFirstArray(exchange(&ops, with: []))
        }

        /// Takes the operation waiting when it is the only one (a change applied at once, issued by its caller).
        mutating func takeOnlyOp() -> LevelOp? {
            ops.count == 1 ? ops.popLast() : nil
        }

        /// Takes `spare`'s storage when the list has none, before an operation is decided: storage another key's
        /// list gave back, so that this one makes none.
        mutating func takeStorage(from spare: inout [LevelOp]) {
            if ops.capacity == 0 { swap(&ops, &spare) }
        }

        /// Lets go of the list's storage once no operation waits: to `spare` when that has none, else for good. A key
        /// holds no room for level operations between them.
        mutating func giveStorage(to spare: inout [LevelOp]) {
            guard ops.isEmpty, ops.capacity > 0 else { return }
            if spare.capacity == 0 { swap(&ops, &spare) } else { ops = [] }
        }

        /// A caller issues the key's operations now.
        mutating func startIssuing() {
            isIssuing = true
        }

        /// The caller issuing them found none left.
        mutating func stopIssuing() {
            isIssuing = false
        }

        /// Makes `write` wait for its timer at `level`; returns the timer of the write it replaces.
        mutating func debounce(_ write: DebouncedWrite, at level: Int) -> (any CancellationToken)? {
            debounced.updateValue(write, forKey: level)?.timer
        }

        /// Keeps the running `timer` of debounced write `id` at `level`; `false` when that write no longer waits.
        mutating func keepTimer(_ timer: any CancellationToken, ofWrite id: Int, level: Int) -> Bool {
            guard debounced[level]?.id == id else { return false }
            debounced[level]?.timer = timer
            return true
        }

        /// The timer of debounced write `id` at `level` fired: the write becomes an operation, when it still waits.
        /// Returns its timer, to release after unlocking.
        /// While the level saves an earlier write, the write waits for it to land instead (`nil`).
        mutating func fire(_ id: Int, level: Int) -> (any CancellationToken)? {
            guard let write = debounced[level], write.id == id else { return nil }
            guard saving[level, default: 0] == 0 else {
                due.insert(level)
                return nil
            }
            debounced[level] = nil
            appendFlush(of: write, at: level, ticket: nil)
            return write.timer
        }

        /// A save of the debounced write at `level` landed: the write that waited for it, if any, becomes an
        /// operation (`issues`, for the caller to issue). Returns that write's timer, to release after unlocking.
        mutating func flushLanded(at level: Int) -> (issues: Bool, timer: (any CancellationToken)?) {
            endSave(at: level)
            guard saving[level] == nil, due.remove(level) != nil, let write = debounced.removeValue(forKey: level)
            else { return (false, nil) }
            appendFlush(of: write, at: level, ticket: nil)
            return (true, write.timer)
        }

        private mutating func appendFlush(of write: DebouncedWrite, at level: Int, ticket: SaveTicket?) {
            saving[level, default: 0] += 1
            ops.append(.flush(write.value, savedAt: write.savedAt, level: level, ticket: ticket, mark: write.mark))
        }

        /// A debounced write's save at `level` landed, or will never be issued.
        private mutating func endSave(at level: Int) {
            saving[level, default: 1] -= 1
            if saving[level] == 0 { saving[level] = nil }
        }

        /// Turns every debounced write into an operation now, in the order of their levels, each holding `ticket`
        /// once; returns their timers, to cancel.
        mutating func flushDebounced(holding ticket: SaveTicket) -> [any CancellationToken] {
            var timers: [any CancellationToken] = []
            due = []
            for (level, write) in exchange(&debounced, with: [:]).sorted(by: { $0.key < $1.key }) {
                ticket.hold()
                appendFlush(of: write, at: level, ticket: ticket)
                timers.append(write.timer)
            }
            return timers
        }

        /// Drops the debounced write waiting at `level` (a newer value is saved there at once); returns its timer.
        mutating func dropDebounced(at level: Int) -> (any CancellationToken)? {
            due.remove(level)
            return debounced.removeValue(forKey: level)?.timer
        }

        /// Drops every debounced write (the value is removed); returns their timers, to cancel.
        mutating func dropDebounced() -> [any CancellationToken] {
            due = []
            return exchange(&debounced, with: [:]).values.map { $0.timer }
        }

        /// Drops everything waiting (a clear): returns the operations, whose tickets the caller releases, and the
        /// debounced writes' timers, to cancel. A caller issuing goes on, and finds none.
        ///
        /// For another process's logout made at `logout` in the processes' order, when the latest save or removal
        /// waiting was made after it (the next user's change, `outlives`), the saves and removals made after it stay,
        /// with the flushes' waits, and are issued once the clear emptied the levels.
        mutating func removeAll(
            keepingChangesAfter logout: UInt64? = nil
        ) -> (ops: [LevelOp], timers: [any CancellationToken], outlives: Bool) {
            var dropped = ops.isEmpty ? [] : exchange(&ops, with: [])
            var outlives = false
            if let logout, let latest = dropped.last(where: { $0.changesLevels }), latest.isPlaced(after: logout) {
                outlives = true
                for operation in exchange(&dropped, with: []) {
                    if operation.isPlaced(after: logout) || operation.isFlushWait {
                        ops.append(operation)
                    } else {
                        dropped.append(operation)
                    }
                }
            }
            // Never issued: their levels are not saving them.
            for case .flush(_, _, let level, _, _) in dropped { endSave(at: level) }
            return (dropped, dropDebounced(), outlives)
        }
    }
}

extension StoreMachine {
    /// A key's level saves: how many were issued and have not landed (by the confirmed version they save), the newest
    /// confirmed versions a level failed to save and saved (a removal or a clear counts as saved), and the flushes
    /// waiting for the saves in flight when they came. While a save is in flight, or a failure is newer than every
    /// success, a level may not hold the confirmed value: the store keeps the key's entry, and a level read of the key
    /// is behind it.
    struct LevelSaves: Sendable {
        /// The oldest confirmed version with saves in flight, and how many; the others in `newer` (usually none: a
        /// change's saves are issued together, so no dictionary is made for a key at rest).
        private var oldest: (version: Int, count: Int)?
        private var newer: [Int: Int] = [:]
        private var failedVersion = 0
        private var savedVersion = 0
        /// Flushes waiting, each until no save of a version up to `upTo` is in flight.
        private var flushes: [(ticket: SaveTicket, upTo: Int)] = []

        /// Whether no save is in flight and no level failed to save a value newer than one saved since.
        var isSettled: Bool { oldest == nil && !isBehind }

        /// Whether saves were issued that have not landed.
        var hasInFlight: Bool { oldest != nil }

        /// Whether a level failed to save a value newer than any saved since.
        var isBehind: Bool { failedVersion > savedVersion }

        /// `count` level saves (or removals) of confirmed version `version` were issued.
        mutating func issue(_ count: Int, version: Int) {
            guard count > 0 else { return }
            guard let current = oldest else {
                oldest = (version, count)
                return
            }
            if version == current.version {
                oldest = (version, current.count + count)
            } else if version < current.version {  // a debounced write of an older value, flushed now
                newer[current.version, default: 0] += current.count
                oldest = (version, count)
            } else {
                newer[version, default: 0] += count
            }
        }

        /// A save of confirmed version `version` landed; `current`: issued under the entry's generation (one from
        /// before a removal or a clear only counts as landed). Returns the flushes it was the last to wait for, to
        /// release after unlocking.
        mutating func land(version: Int, failed: Bool, current: Bool) -> [SaveTicket] {
            if let first = oldest, first.version == version {
                if first.count > 1 {
                    oldest = (version, first.count - 1)
                } else if let next = newer.keys.min() {
                    oldest = (next, newer.removeValue(forKey: next) ?? 0)
                } else {
                    oldest = nil
                }
            } else {
                guard let count = newer[version], count > 0 else {
                    preconditionFailure("A level save lands that was not issued")
                }
                newer[version] = count == 1 ? nil : count - 1
            }
            if current {
                if failed {
                    failedVersion = max(failedVersion, version)
                } else {
                    savedVersion = max(savedVersion, version)
                }
            }
            guard !flushes.isEmpty else { return [] }
            let oldestInFlight = oldest?.version ?? .max
            var done: [SaveTicket] = []
            flushes.removeAll { flush in
                guard flush.upTo < oldestInFlight else { return false }
                done.append(flush.ticket)
                return true
            }
            return done
        }

        /// Makes a flush's `ticket` wait for the saves in flight now (not for those issued later); `false` when none
        /// is in flight (the caller releases it).
        mutating func whenLanded(_ ticket: SaveTicket) -> Bool {
            guard let first = oldest else { return false }
            flushes.append((ticket, max(first.version, newer.keys.max() ?? first.version)))
            return true
        }

        /// The levels are emptied with the confirmed value at `confirmedVersion` (a clear): nothing is behind.
        mutating func cleared(at confirmedVersion: Int) {
            (failedVersion, savedVersion) = (0, confirmedVersion)
        }
    }
}

extension StoreMachine {
    /// Who issues the keys' level operations, and a clear waiting for them: a clear empties the levels (`removeAll`)
    /// only once no caller is issuing operations decided before it, and the operations decided meanwhile wait (are
    /// held) until that `removeAll` is issued, so that none lands on the levels before it.
    ///
    /// Invariants: while a clear waits, no caller starts issuing; exactly one caller is told to issue its
    /// `removeAll` (the clear's, or the last to stop issuing); the held keys are handed back once, when it is issued.
    struct LevelIssuing: Sendable {
        /// The callers issuing level operations now (one per key at most: see ``LevelWrites/isIssuing``).
        private var issuing = 0
        /// Keys whose level operations wait for a clear's `removeAll`, in the order they were held.
        private var held: [Key] = []
        /// The callers of the clears waiting for the levels to be empty.
        private var completions: [@Sendable () -> Void] = []
        /// Whether a clear waits for its `removeAll` to be issued.
        private(set) var isClearing = false
        /// Whether a caller was told to issue that `removeAll`.
        private var isAssigned = false
        /// How many levels, fastest first, the clears waiting empty: every level, unless each of them is what
        /// another process made of a level they share (it is emptied already; the faster ones are).
        private(set) var levelsToEmpty = 0
        /// The place in the processes' order of the latest clear waiting that empties the shared level, given as the
        /// clear was made (`nil` or ``SaveMark/unplaced``: its `removeAll` takes one as it is issued).
        private(set) var place: UInt64?

        /// A caller would issue `key`'s level operations: `true` when it may, `false` when a clear holds them.
        mutating func start(_ key: Key) -> Bool {
            guard !isClearing else {
                hold(key)
                return false
            }
            issuing += 1
            return true
        }

        /// A caller stops issuing `key`'s level operations; `hasMore`: the key has operations it did not issue (a
        /// clear holds them). Returns whether that caller issues the clear's `removeAll` now.
        mutating func stop(_ key: Key, hasMore: Bool) -> Bool {
            precondition(issuing > 0, "A caller stops issuing level operations it did not start issuing")
            issuing -= 1
            guard isClearing else { return false }
            if hasMore { held.append(key) }
            return assignRemoveAll()
        }

        /// A clear of the first `levels` levels begins, or joins one waiting: `completion` is called once they are
        /// empty; one that empties the shared level has its `place` in the processes' order. Returns whether the
        /// caller issues the `removeAll` now (no caller is issuing operations).
        mutating func clear(
            levels: Int = .max, place: UInt64? = nil, completion: @escaping @Sendable () -> Void
        ) -> Bool {
            isClearing = true
            if let place { self.place = max(self.place ?? 0, place) }
            levelsToEmpty = max(levelsToEmpty, levels)
            completions.append(completion)
            return assignRemoveAll()
        }

        /// The clear's `removeAll` was issued: returns the callers waiting for it and the keys held meanwhile. The
        /// caller starts issuing those that still have operations (``resume(_:)``).
        mutating func removeAllIssued() -> (
            completions: [@Sendable () -> Void], held: [Key], levels: Int, place: UInt64?
        ) {
            precondition(isClearing, "A clear's removeAll is issued while no clear waits")
            isClearing = false
            isAssigned = false
            return (
                exchange(&completions, with: []), exchange(&held, with: []), exchange(&levelsToEmpty, with: 0),
                exchange(&place, with: nil)
            )
        }

        /// Callers start issuing the operations of `count` keys held by a clear.
        mutating func resume(_ count: Int) {
            issuing += count
        }

        private mutating func hold(_ key: Key) {
            if !held.contains(key) { held.append(key) }
        }

        private mutating func assignRemoveAll() -> Bool {
            guard issuing == 0, !isAssigned else { return false }
            isAssigned = true
            return true
        }
    }
}
