#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A read of one key: its steps outside the lock (`StoreRead`), the answers it gives, and the machine's side of
// its level reads (beginning one, ending one, going on to the fetch).

/// A policy's read of one key in progress, run by the store's core (compiled once, not generic): it reads the levels
/// in order, fetches when they have nothing the policy takes, and answers with the first response (a level's hit,
/// the fetched value, or the value shown with the fetch's error attached). It is also the read's cancellation token.
///
/// A stream's read is told of a failure only (`onFailure`), as the stream shows the key's changes; a load's read
/// answers through ``deliver(_:)``, which ``LoadAnsweringRead`` overrides with the load's typed completion.
///
/// One object carries the whole read, so that its steps need no closure state of their own. What another thread may
/// touch (`awaitsAnswer`, `isCancelled`, `joinedFetch`, `since`, `asked`, `stopLevelRead`) changes only under the
/// store's lock, with the machine's work; the fields of the level read in flight are set before that read starts and
/// read by its completion, one level after another. That is what makes it safe to send.
@usableFromInline
class StoreRead: CancellationToken, @unchecked Sendable {
    typealias Response = StoreResponse<any StoreValueBox>

    let engine: StoreEngine
    let key: StoreKeyRef
    let policy: ReadPolicy
    /// When the read began (only when the policy judges age).
    let began: Date
    /// Whether the store held the key when the read first looked at it (see ``begin()``).
    private let held: Bool
    /// A stream's read: told of a failure only.
    private let onFailure: (@Sendable (any Error) -> Void)?
    /// The read this one answers, when it was made to (see ``answerAfterRemoval()``).
    private let overtaken: StoreRead?
    /// Whether a load waits for the read's answer: set before the read is shared, taken by its answer or its cancel.
    private var awaitsAnswer = false
    private var isCancelled = false
    /// The fetch the read waits for (the fetch's id, the read's caller id), which a cancel leaves.
    private var joinedFetch: (id: Int, caller: Int)?
    /// The stamp of the read's first level read: what the store knew when the read began.
    private var since: StoreMachine.ReadStamp?
    // The level read in flight.
    private var purpose = Purpose.cache
    private var level = 0
    private var stamp = StoreMachine.ReadStamp(generation: 0, confirmedVersion: 0, staleMark: 0)
    private var inStep = false
    private var rules: StoreMachine.StaleRules?
    /// What the read found in the level the store shares with other processes and did not take, for the fetch it
    /// starts: the date of the value (seconds since the reference date), `-infinity` when the level had none; `nil`
    /// until that level answers, or when it failed or its value may be stale for more than its age (it tells
    /// nothing then). Set as that level answers.
    private var foundInSharedLevel: Double?
    /// Whether the read holds its key in the store from a cache-then-network hit until its fetch has begun, so that
    /// the value it served stays shown meanwhile.
    private var holdsKey = false
    /// Whether the read waited for the changes asked before it (see ``start()``).
    private var hasWaited = false
    /// What stops the level read in flight early, when its level can.
    private var stopLevelRead: (@Sendable () -> Void)?
    /// Where the read stands in the store's order, once it began (after the changes asked before it): a change asked
    /// after it is applied again to what its fetch brings.
    private var asked: Int?

    init(
        engine: StoreEngine, key: StoreKeyRef, policy: ReadPolicy, began: Date?, held: Bool,
        onFailure: (@Sendable (any Error) -> Void)?, answering overtaken: StoreRead? = nil
    ) {
        self.engine = engine
        self.key = key
        self.policy = policy
        self.began =
            began ?? (policy.maxAgeSeconds == nil && !engine.levelsLimitAge ? Date.distantPast : engine.now())
        self.held = held
        self.onFailure = onFailure
        self.overtaken = overtaken
    }

    /// Whether the read answers a load (a stream's read is told of a failure only).
    var answersLoad: Bool { onFailure == nil }

    /// Hands the read's answer to the load waiting for it (called once, unlocked); a read made to answer another
    /// answers it with what it found, else with what the key shows.
    func deliver(_ result: Result<Response, any Error>) {
        overtaken?.answer((try? result.get()) ?? engine.shownResponse(of: key))
    }

    /// Lets go of what waits for the answer, after a cancel (unlocked).
    func dropAnswer() {}

    /// Starts the read of a load, whose answer goes to ``deliver(_:)``. A key the store did not hold when the load
    /// looked at it is read from the levels (or fetched) at once.
    func begin() {
        awaitsAnswer = true  // before the read is shared: no lock needed
        if held || engine.runsChange(of: key) { start() } else { startWithNothingHeld() }
    }

    /// Answers from the store's value when the policy takes it, else reads the levels or fetches; after the changes
    /// of the key asked before it, when some run or wait (a read sees the writes made before it). Made from inside a
    /// change of the key (its transform, on the thread running it), which cannot end before the read does, it
    /// answers at once with what the key shows, whatever its policy.
    func start() {
        // Ages are judged as of now, read before the lock.
        let now = began == .distantPast ? began : max(began, engine.now())
        var insideChange = false
        var stampedLater = false
        var cached = engine.run(key) { machine, slot -> (snapshot: StoreMachine.Snapshot?, fresh: Bool)?? in
            // The read's place in the store's order: before the changes asked after it, which its fetch applies
            // again to what it brings.
            if asked == nil { asked = machine.readStamp }
            if !hasWaited, machine.isChanging(slot), engine.runsChange(of: key) {
                insideChange = true
                return (machine.showsSomething(slot) ? machine.shownNow(slot) : nil, true)
            }
            if !hasWaited, machine.awaitTurn(of: slot, then: { [self] in afterTurn() }) { return nil }
            if since == nil, policy.kind == .cacheFirst || policy.kind == .cacheOnly {
                since = machine.stamp(of: slot)
            }
            let cached = machine.cached(slot, under: policy, now: now)
            stampedLater = now != .distantPast && cached?.fresh == false && machine.isStamped(slot, after: now)
            return cached
        }
        if stampedLater, case .some = cached {
            // A value the store learned after the clock was read (a fetch's answer) is new, not stamped in the
            // future: it is judged again by the clock read now (a clock set back still finds it stamped later).
            let later = max(now, engine.now())
            cached = engine.run(key) { machine, slot in machine.cached(slot, under: policy, now: later) }
        }
        guard let cached else { return }  // its turn comes later
        if insideChange {
            guard let snapshot = cached?.snapshot else { return fail(StoreError.changeInProgress) }
            return answer(snapshot.response)
        }
        switch policy.kind {
        case .cacheFirst, .cacheOnly:
            guard let snapshot = cached?.snapshot, cached?.fresh == true else { return readLevel(0, for: .cache) }
            engine.tellHeldValueRead(key)
            answer(snapshot.response)
        case .cacheThenNetwork:
            guard let cached, let snapshot = cached.snapshot else { return readLevel(0, for: .cacheThenNetwork) }
            engine.tellHeldValueRead(key)
            answer(snapshot.response)
            if !cached.fresh { startFetch() }
        case .networkFirst, .networkOnly:
            startFetch()
        }
    }

    /// The read's turn came, after the changes asked before it: it goes on (once; changes asked after it do not
    /// hold it again).
    private func afterTurn() {
        hasWaited = true
        start()
        endTurnHold()
    }

    /// Lets go of the key its turn held (see ``StoreMachine/awaitTurn(of:then:)``), once the read went on: what it
    /// began (a level read, a fetch) holds the key now.
    func endTurnHold() {
        _ = engine.run(key) { $0.endLevelRead($1) }
    }

    /// ``start()`` for a key the store did not hold a moment ago, which it need not look at again: the levels are
    /// read (or, for a network policy, the fetch begins), and what the store learned meanwhile is found there.
    private func startWithNothingHeld() {
        switch policy.kind {
        case .cacheFirst, .cacheOnly:
            // The store held nothing: a value it confirms before the read's fetch begins is the answer.
            since = StoreMachine.ReadStamp(generation: 0, confirmedVersion: 0, staleMark: 0)
            readLevel(0, for: .cache)
        case .cacheThenNetwork: readLevel(0, for: .cacheThenNetwork)
        case .networkFirst, .networkOnly: startFetch()
        }
    }

    /// Cancels the read while it has not answered; once it has, what it still does (the fetch of a
    /// cache-then-network read) goes on.
    @usableFromInline
    func cancel() {
        typealias Left = (garbage: [Any], cancel: (any CancellationToken)?, stop: (@Sendable () -> Void)?)
        let (dropped, left) = engine.run(key) { machine, slot -> (Bool, Left?) in
            guard !isCancelled, onFailure != nil || awaitsAnswer else { return (false, nil) }
            isCancelled = true
            let left = joinedFetch.map { machine.leaveFetch($0.id, caller: $0.caller, of: slot) }
            joinedFetch = nil
            let dropped = awaitsAnswer
            awaitsAnswer = false
            return (dropped, (left?.garbage ?? [], left?.cancel, stopLevelRead.take()))
        }
        left?.cancel?.cancel()
        left?.stop?()
        if dropped { dropAnswer() }  // the caller's completion, released after unlocking
        withExtendedLifetime(left?.garbage) {}
    }

    // MARK: Answering

    /// Whether the read still owes its load an answer, which the caller then gives (taken under the lock).
    private func takeAwaitedAnswer() -> Bool {
        engine.run { _ in
            defer { awaitsAnswer = false }
            return awaitsAnswer
        }
    }

    func answer(_ response: Response) {
        guard answersLoad else { return }
        if takeAwaitedAnswer() { deliver(.success(response)) }
    }

    func fail(_ error: any Error) {
        if let onFailure {
            if !engine.run({ _ in isCancelled }) { onFailure(error) }
            return
        }
        if takeAwaitedAnswer() { deliver(.failure(error)) }
    }

    /// Attaches `error` to the key's shown value and answers with it, or fails when nothing is shown (or what is
    /// shown is older than the policy serves after a failure).
    func reportOrFail(_ error: any Error) {
        guard let snapshot = engine.run(key, { $0.attach(error, to: $1) }) else { return fail(error) }
        engine.publish(snapshot)
        guard servesAfterFailure(snapshot.response) else { return fail(error) }
        answer(snapshot.response)
    }

    /// Whether `response` may answer the read after its fetch failed (see ``ReadPolicy/cacheFirst(maxAge:maxStale:)``).
    func servesAfterFailure(_ response: Response) -> Bool {
        policy.maxStaleSeconds == nil || policy.servesAfterFailure(savedAt: response.savedAt, now: engine.now())
    }

    // MARK: Reading the levels

    /// Reads level `index` on the caller's thread (each next one on the thread the previous one completed on),
    /// unless the store knows better (see ``StoreMachine/beginLevelRead(_:level:)``).
    func readLevel(_ index: Int, for purpose: Purpose) {
        guard index < engine.levels.count else { return levelsDone(nil, for: purpose) }
        let begun = engine.run(key) { machine, slot -> StoreMachine.LevelRead? in
            guard !isCancelled else { return nil }
            if asked == nil { asked = machine.readStamp }
            let begun = machine.beginLevelRead(slot, level: index)
            guard case .read(let stamp, let inStep) = begun else { return begun }
            if index == 0, since == nil, case .cache = purpose { since = stamp }
            (self.purpose, level, self.stamp, self.inStep) = (purpose, index, stamp, inStep)
            rules = machine.staleRules(for: slot)  // what a hit is judged by, as of this read
            return begun
        }
        switch begun {
        case nil:
            return
        case .known(let snapshot):
            let taken = snapshot.flatMap { takes($0, for: purpose) } == true
            return levelsDone(taken ? snapshot?.response : nil, for: purpose)
        case .read:
            let stop = engine.levels[index].read(key.object) { [self] result in levelAnswered(result) }
            // A level that can stop early (an async one) is told when the read is cancelled.
            guard let stop else { return }
            let cancelled = engine.run { _ -> Bool in
                guard !isCancelled else { return true }
                stopLevelRead = stop
                return false
            }
            if cancelled { stop() }
        }
    }

    /// A level answered: a hit the read takes is confirmed in order with the key's changes; otherwise the read goes
    /// on, unless the store learned a value meanwhile (a fetch that answered), which is the answer.
    private func levelAnswered(_ result: Result<CachedValue<any StoreValueBox>, any Error>) {
        var invalidated = !inStep  // whether a value the read does not take may be stale for more than its age
        // A hit from a level behind the store (its write not issued yet) is older than what the store holds.
        if inStep, case .success(let cached) = result, !engine.run({ _ in isCancelled }) {
            // The invalidations are judged here, outside the lock: a predicate is the caller's code.
            let staleSince = rules?.staleSince(key.anyKey, savedAt: cached.savedAt)
            invalidated = staleSince != nil
            if takes(cached.savedAt, stale: staleSince != nil, for: purpose) {
                if case .cacheThenNetwork = purpose {
                    holdsKey = true
                    engine.run(key) { $0.holdKey($1) }
                }
                let error: (any Error)? = if case .fallback(let error) = purpose { error } else { nil }
                let hit = StoreMachine.Job.hit(
                    cached, level: level, stamp: stamp, staleSince: staleSince, error: error,
                    reply: { [self] snapshot in hitConfirmed(snapshot) })
                return engine.submit(hit, of: key)
            }
        }
        if level == engine.coordinatedLevel {
            foundInSharedLevel =
                switch result {
                case _ where invalidated: nil
                case .success(let cached): cached.savedAt.timeIntervalSinceReferenceDate
                case .failure(is CacheMiss): -.infinity
                case .failure: nil
                }
        }
        // A miss of the last level begins the fetch under the same lock, keeping the key in use.
        let fetches = level + 1 == engine.levels.count && fetchesOnMiss(purpose)
        var object: StoreKeyRef?
        let (miss, cancelled) = engine.run(key, keeping: &object) {
            machine, slot -> (StoreMachine.LastLevelMiss, Bool) in
            guard fetches, !isCancelled else {
                return (.learned(machine.endLevelRead(slot, since: stamp)), isCancelled)
            }
            let miss = machine.endLastLevelReadThenFetch(
                slot, readAt: stamp, since: since, asked: asked ?? machine.readStamp
            ) { [self] in fetched($0) }
            if case .fetch(let begun) = miss { joinedFetch = begun.joinedFetch }
            return (miss, false)
        }
        guard !cancelled else { return }
        switch miss {
        case .fetch(let begun):
            fetchBegun(begun, object: object)
        case .learned(let learned):
            // What the store learned answers (no value too, after a removal), unless it is a value too old.
            if let learned, takes(learned, for: purpose) ?? true {
                return levelsDone(learned.response, for: purpose)
            }
            readLevel(level + 1, for: purpose)
        }
    }

    /// The store confirmed the level's hit the read took: it answers with what the key shows after it.
    private func hitConfirmed(_ snapshot: StoreMachine.Snapshot) {
        if !engine.run({ _ in isCancelled }) { levelsDone(snapshot.response, for: purpose) }
        if holdsKey {
            holdsKey = false
            _ = engine.run(key) { $0.endLevelRead($1) }  // the fetch, if any, holds the key now
        }
    }

    // MARK: Fetching

    /// Tells the store's coordination with other processes what the read found in the level they share, before fetch
    /// `id`, which the read starts, goes upstream: a value saved there later is the fetch's answer too (one
    /// process fetches, the others take what it saved, even when it saved it while this read was still at a level
    /// after the shared one).
    func noteSharedLevelRead(beforeFetch id: Int) {
        guard let found = foundInSharedLevel else { return }
        engine.noteSharedLevelRead(found, beforeFetch: id)
    }

    /// Joins the key's fetch in flight, or starts one on this thread. A read whose levels missed passes the stamp of
    /// its first level read: a value the store learned since is the answer, and no fetch starts.
    func startFetch() {
        var object: StoreKeyRef?
        let begun = engine.run(key, keeping: &object) { machine, slot -> StoreMachine.FetchStart? in
            guard !isCancelled else { return nil }
            if asked == nil { asked = machine.readStamp }
            let begun = machine.beginFetch(slot, joining: true, since: since, asked: asked) { [self] in fetched($0) }
            joinedFetch = begun.joinedFetch
            return begun
        }
        if let begun { fetchBegun(begun, object: object) }
    }
}

extension StoreRead {
    /// What the levels are read for, and so what their answer means.
    enum Purpose {
        /// A cache-first or cache-only read: the first hit young enough for the policy answers.
        case cache
        /// A cache-then-network read with nothing shown: any hit answers, then the fetch runs unless it is fresh.
        case cacheThenNetwork
        /// A fetch failed: a level's value is shown with `error` attached, else the store's, else the read fails.
        case fallback(any Error)
    }

    /// Whether the read fetches when the levels miss.
    func fetchesOnMiss(_ purpose: Purpose) -> Bool {
        switch purpose {
        case .cache: policy.kind != .cacheOnly
        case .cacheThenNetwork: true
        case .fallback: false
        }
    }

    /// Whether the read takes the value `snapshot` shows (see ``takes(_:stale:for:)``); `nil` when it shows none.
    func takes(_ snapshot: StoreMachine.Snapshot, for purpose: Purpose) -> Bool? {
        snapshot.confirmed.savedAt.map { takes($0, stale: snapshot.isStale, for: purpose) }
    }

    /// Whether the read takes a level's value saved at `savedAt`: a cache-first read, a fresh one (not invalidated,
    /// young enough); the others any.
    func takes(_ savedAt: Date, stale: Bool, for purpose: Purpose) -> Bool {
        guard case .cache = purpose, policy.kind != .cacheOnly else { return true }
        return !stale && policy.accepts(savedAt: savedAt, now: engine.now())
    }

    /// The levels were read: `hit` is what the key shows after the hit they gave, or `nil` when none did.
    func levelsDone(_ hit: Response?, for purpose: Purpose) {
        switch purpose {
        case .cache:
            if let hit { return answer(hit) }
            if policy.kind == .cacheOnly { return fail(CacheMiss.absent) }
            startFetch()
        case .cacheThenNetwork:
            // The fetch goes on after a hit, unless the hit is fresh.
            if let hit { answer(hit) }
            let fresh = hit != nil && engine.run(key) { $0.isFresh($1, under: policy, now: began) }
            if !fresh { startFetch() }
        case .fallback(let error):
            if let hit, hit.error != nil, servesAfterFailure(hit) { answer(hit) } else { reportOrFail(error) }
        }
    }

    /// The read joined a fetch, or began one, which it starts; or the store had the answer. `object` is the key as
    /// the store keeps it, from the event that began the fetch.
    func fetchBegun(_ begun: StoreMachine.FetchStart, object: StoreKeyRef?) {
        switch begun {
        case .answered(let snapshot): fetched(.success(snapshot))
        case .joined(let id, _): engine.tellJoined(id, of: key)
        case .starts(let fetch, _):
            noteSharedLevelRead(beforeFetch: fetch)
            engine.startUpstream(fetch, of: object ?? key)
        }
    }

    /// The fetch answered: with its value, with the shown one when a removal or a clear dropped it, or with a
    /// failure, shown attached to a value when there is one (networkFirst looks in the levels first).
    func fetched(_ result: Result<StoreMachine.Snapshot, any Error>) {
        switch result {
        case .success(let snapshot):
            answer(snapshot.response)
        case .failure(let error as StoreError) where error == .discarded:
            answerAfterRemoval()
        case .failure(let error):
            // The read answers as of its fetch's failure: after the changes of the key asked before it, which it
            // waits for when they are still queued.
            let waits = engine.run(key) { machine, slot in
                machine.awaitTurn(of: slot) { [self] in
                    fallBack(from: error)
                    endTurnHold()
                }
            }
            guard !waits else { return }
            fallBack(from: error)
        }
    }

    /// What the read answers when its fetch failed: the value shown with the error (unless it asked for the network
    /// first), else the levels' value, else the failure.
    func fallBack(from error: any Error) {
        if policy.kind != .networkFirst, engine.run(key, { $0.showsSomething($1) }) { return reportOrFail(error) }
        readLevel(0, for: .fallback(error))
    }
}

extension StoreRead {
    /// A removal or a clear overtook the read's fetch: the answer is what the key has after it, as a cache-only read
    /// finds it (what the store holds, else what its levels hold, written since), no value when none. The key may
    /// have fallen out of use meanwhile, so the store alone cannot say.
    func answerAfterRemoval() {
        guard answersLoad else { return }
        let after = StoreRead(
            engine: engine, key: key, policy: .cacheOnly, began: nil, held: true, onFailure: nil, answering: self)
        after.begin()
    }
}

/// A read that answers a load of a ``Store``: the read's answer, typed, goes to the load's completion.
@usableFromInline
final class LoadAnsweringRead<Value: Sendable>: StoreRead, @unchecked Sendable {
    /// The load's completion, set before the read is shared, taken by its answer or dropped by its cancel (never
    /// both: the read's lock decides which).
    private var completion: HandedCompletion<StoreResponse<Value>>?

    @usableFromInline
    init(engine: StoreEngine, key: AnyStoreKey, hash: Int, policy: ReadPolicy, began: Date, held: Bool) {
        super.init(
            engine: engine, key: StoreKeyRef(object: key, hash: hash), policy: engine.defaulted(policy), began: began,
            held: held, onFailure: nil)
    }

    /// Starts the read for the load whose completion is `completion`; the read is the load's token.
    @usableFromInline
    func begin(_ completion: HandedCompletion<StoreResponse<Value>>) -> any CancellationToken {
        self.completion = completion
        begin()
        return self
    }

    override func deliver(_ result: Result<Response, any Error>) {
        completion.take()?.call(result.map { StoreResponse($0) })
    }

    override func dropAnswer() {
        completion = nil
    }
}

/// A load's completion in the form `AnyLoader` hands it over, its output's type left generic. A read keeps it and
/// calls it in that form: converting a kept closure to another calling form allocates (a response is passed
/// directly, but an output of unknown type indirectly).
@usableFromInline
struct HandedCompletion<Output: Sendable> {
    @usableFromInline let call: LoadCompletion<Output>

    @inlinable
    init(_ call: @escaping LoadCompletion<Output>) {
        self.call = call
    }
}

extension StoreMachine {
    /// Starts a read of level `level` for `key`, unless the store knows better: a change of the key is running (the
    /// answer is what it shows) or a clear is emptying the levels (a miss). A level whose writes for the key are
    /// not issued yet (a debounced write, operations waiting) may be read, but its hit is older than what the store
    /// confirmed: `inStep` is false, and the store takes it as a miss. A level in step is read like any other (a
    /// value too old for the store may be young enough there, written by another process).
    mutating func beginLevelRead(_ key: Key, level: Int) -> LevelRead {
        guard !issuing.isClearing else { return .known(nil) }
        let entry = ensureEntry(key)
        guard !(entry.confirmed.isKnown && !entry.work.turn.isFree) else {
            defer { release(key) }
            return .known(entry.confirmed.value == nil ? nil : shownNow(key))
        }
        // Levels that could not save what the store confirmed (or remove it) are behind too, until a save lands.
        let behind =
            entry.work.writes.isBehind(at: level) || entry.work.saves.isBehind
        entry.levelReads += 1
        let stamp = ReadStamp(
            generation: entry.generation, confirmedVersion: entry.confirmed.version, staleMark: entry.staleness.mark)
        return .read(stamp, inStep: !behind)
    }

    /// Whether a change of `key` runs or waits (a read asked now comes after it).
    func isChanging(_ key: Key) -> Bool {
        peek(key).map { !$0.work.turn.isFree } ?? false
    }

    /// Queues a read of `key` behind the changes of the key that run or wait (asked before it), when there are some:
    /// `reply` is called when its turn comes, and the read goes on then, seeing what they made; it holds the key, as a
    /// level read does, until it ends that with ``endLevelRead(_:since:)`` once its next step holds the key in turn.
    /// `false` when the key's turn is free (the read goes on at once).
    mutating func awaitTurn(of key: Key, then reply: @escaping @Sendable () -> Void) -> Bool {
        guard let entry = entry(key), !entry.work.turn.isFree else { return false }
        enqueue(.barrier(reply: reply), on: entry)
        return true
    }

    /// Holds `key` in the store as a level read does, until ``endLevelRead(_:since:)``: a read that answered with a
    /// hit keeps the value it served shown until its fetch has begun.
    mutating func holdKey(_ key: Key) {
        ensureEntry(key).levelReads += 1
    }

    /// Ends a level read that brought nothing to confirm (a miss, a failure, a value too old, a cancel). Returns
    /// what the key shows when the store learned something since the read began (a fetch or a write confirmed a
    /// value, or a removal or a clear overtook it): that is the read's answer, rather than reading on or fetching.
    /// A change that confirmed no value (another change's read of the levels, which found nothing) teaches nothing.
    mutating func endLevelRead(_ key: Key, since stamp: ReadStamp? = nil) -> Snapshot? {
        guard let entry = entry(key) else { return nil }
        entry.levelReads -= 1
        defer { release(key) }
        guard let stamp,
            entry.generation != stamp.generation
                || (entry.confirmed.version != stamp.confirmedVersion && entry.confirmed.value != nil)
        else { return nil }
        return shownNow(key)
    }

    /// Ends a read of the last level that brought nothing to confirm, and begins the read's fetch (see
    /// ``beginFetch(_:joining:since:completion:)``; `since` is the stamp of the read's first level read): the key
    /// stays in use from one to the other, so its entry is neither dropped nor made again. When the store learned
    /// something since this level read began, the read ends as ``endLevelRead(_:since:)`` ends it, and no fetch
    /// begins: what it learned is returned.
    mutating func endLastLevelReadThenFetch(
        _ key: Key, readAt stamp: ReadStamp, since: ReadStamp?, asked: Int, completion: @escaping FetchCompletion
    ) -> LastLevelMiss {
        // What the store learned is the answer, unless an invalidation made it stale since: then the read fetches.
        guard let entry = entry(key),
            entry.generation == stamp.generation
                && (entry.confirmed.version == stamp.confirmedVersion || entry.staleness.isStale)
        else { return .learned(endLevelRead(key, since: stamp)) }
        entry.levelReads -= 1
        return .fetch(beginFetch(key, joining: true, since: since, asked: asked, completion: completion))
    }

    /// What the store knows of `key` now, for a read that goes on to the levels: a value it confirms before the
    /// read's fetch begins is the read's answer (see ``beginFetch(_:joining:since:asked:completion:)``).
    func stamp(of key: Key) -> ReadStamp {
        let entry = peek(key)
        return ReadStamp(
            generation: entry?.generation ?? 0, confirmedVersion: entry?.confirmed.version ?? 0,
            staleMark: entry?.staleness.mark ?? 0)
    }

    /// Where a read that begins now stands in the store's order: a change asked after it is applied again to what
    /// its fetch brings.
    var readStamp: Int { counter }
}

extension StoreMachine {
    /// Whether the levels are read for a key, or what the store knows answers instead (`nil`: a miss). The
    /// invalidations a hit is judged by are read from ``StoreMachine/staleRules(for:)`` under the same lock.
    enum LevelRead {
        /// Read the level; a hit counts only when the level is `inStep` with the store.
        case read(ReadStamp, inStep: Bool)
        case known(Snapshot?)
    }

    /// What a level read knew of its key when it started.
    struct ReadStamp: Sendable {
        let generation: Int
        let confirmedVersion: Int
        /// The entry's stale mark: one that changed while the level was read is an invalidation that matched the key.
        let staleMark: Int
    }

    /// What a level read's caller receives.
    struct HitReplyDelivery {
        init(reply: @escaping HitReply, snapshot: Snapshot) {
            self.reply = reply
            self.snapshot = snapshot
        }

        let reply: HitReply
        let snapshot: Snapshot
    }
}
