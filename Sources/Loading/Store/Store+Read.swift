#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Runs `policy` for `key` for a stream, which shows the key's changes itself: `fail` is told when the policy
    /// ends with nothing to show.
    @inlinable
    func run(
        _ policy: ReadPolicy, for key: Key, fail: @escaping @Sendable (any Error) -> Void
    ) -> any CancellationToken {
        let read = PolicyRun(store: self, key: key, policy: policy, onFailure: fail)
        read.start()
        return read
    }

    /// A policy's read in progress: it reads the levels in order, fetches when they have nothing the policy takes,
    /// and answers its caller with the first response (a level's hit, the fetched value, or the value shown with the
    /// fetch's error attached). It is also the read's cancellation token.
    ///
    /// One object carries the whole read, so that its steps need no closure state of their own. What another
    /// thread may touch (`completion`, `isCancelled`, `joinedFetch`, `since`) changes only under the store's lock, with
    /// the machine's work; the fields of the level read in flight are set before that read starts and read by its
    /// completion, one level after another, and `startedFetch` is set before the upstream load it names starts. That
    /// is what makes it safe to send.
    @usableFromInline
    final class PolicyRun: CancellationToken, @unchecked Sendable {
        /// What the levels are read for, and so what their answer means.
        @usableFromInline
        enum Purpose {
            /// A cache-first or cache-only read: the first hit young enough for the policy answers.
            case cache
            /// A cache-then-network read with nothing shown: any hit answers, then the fetch runs unless it is fresh.
            case cacheThenNetwork
            /// A fetch failed: a level's value is shown with `error` attached, else the store's, else the read fails.
            case fallback(any Error)
        }

        @usableFromInline let store: Store
        @usableFromInline let key: Key
        @usableFromInline let policy: ReadPolicy
        /// When the read began (only when the policy judges age).
        @usableFromInline let began: Date
        /// Whether the store held the key when the read first looked at it (see ``begin(_:)``).
        @usableFromInline let held: Bool
        /// A stream's read: told of a failure only, as the stream shows the key's changes.
        @usableFromInline let onFailure: (@Sendable (any Error) -> Void)?
        /// A load's completion, until it is answered or cancelled.
        @usableFromInline @exclusivity(unchecked) var completion: HandedCompletion<StoreResponse<Value>>?
        @usableFromInline @exclusivity(unchecked) var isCancelled = false
        /// The fetch the read waits for (the fetch's id, the read's caller id), which a cancel leaves.
        @usableFromInline @exclusivity(unchecked) var joinedFetch: (id: Int, caller: Int)?
        /// The fetch whose upstream load the read started (a read starts one at most): that load reports to it.
        @usableFromInline @exclusivity(unchecked) var startedFetch = 0
        /// The stamp of the read's first level read: what the store knew when the read began.
        @usableFromInline @exclusivity(unchecked) var since: Machine.ReadStamp?
        // The level read in flight.
        @usableFromInline @exclusivity(unchecked) var purpose = Purpose.cache
        @usableFromInline @exclusivity(unchecked) var level = 0
        @usableFromInline @exclusivity(unchecked) var stamp = Machine.ReadStamp(
            generation: 0, confirmedVersion: 0, staleMark: 0)
        @usableFromInline @exclusivity(unchecked) var inStep = false
        @usableFromInline @exclusivity(unchecked) var rules: Machine.StaleRules?
        /// Whether the read holds its key in the store from a cache-then-network hit until its fetch has begun, so
        /// that the value it served stays shown meanwhile (set and read by the read's own steps, one after another).
        @usableFromInline @exclusivity(unchecked) var holdsKey = false
        /// Whether the read waited for the changes asked before it (see ``start()``).
        @usableFromInline @exclusivity(unchecked) var hasWaited = false
        /// What stops the level read in flight early, when its level can (set and taken under the store's lock).
        @usableFromInline var stopLevelRead: (@Sendable () -> Void)?
        /// Where the read stands in the store's order, once it began (after the changes asked before it): a change
        /// asked after it is applied again to what its fetch brings. Set under the store's lock.
        @usableFromInline @exclusivity(unchecked) var asked: Int?

        @inlinable
        init(
            store: Store, key: Key, policy: ReadPolicy, began: Date? = nil, held: Bool = true,
            onFailure: (@Sendable (any Error) -> Void)?
        ) {
            self.store = store
            self.key = key
            self.policy = policy
            self.began = began ?? (policy.maxAgeSeconds == nil ? Date.distantPast : store.now())
            self.held = held
            self.onFailure = onFailure
        }

        /// Starts the read of a load, made when ``Store/read(_:policy:)``'s loader looked at the key and found no
        /// answer: it answers `completion`, and it is the load's token. A key the store did not hold then is read from
        /// the levels (or fetched) at once.
        @inlinable
        func begin(_ completion: HandedCompletion<StoreResponse<Value>>) -> any CancellationToken {
            self.completion = completion  // before the read is shared: no lock needed
            if held { start() } else { startWithNothingHeld() }
            return self
        }

        /// Answers from the store's value when the policy takes it, else reads the levels or fetches; after the
        /// changes of the key asked before it, when some run or wait (a read sees the writes made before it).
        @inlinable
        func start() {
            let cached = store.locked(key) { machine, slot -> (snapshot: Machine.Snapshot?, fresh: Bool)?? in
                // The read's place in the store's order: before the changes asked after it, which its fetch applies
                // again to what it brings.
                if asked == nil { asked = machine.readStamp }
                if !hasWaited, machine.awaitTurn(of: slot, then: { [self] in afterTurn() }) { return nil }
                if since == nil, policy.kind == .cacheFirst || policy.kind == .cacheOnly {
                    since = machine.stamp(of: slot)
                }
                return machine.cached(slot, under: policy, now: began)
            }
            guard let cached else { return }  // its turn comes later
            switch policy.kind {
            case .cacheFirst, .cacheOnly:
                guard let snapshot = cached?.snapshot, cached?.fresh == true else { return readLevel(0, for: .cache) }
                if let events = store.events { events(.heldValueRead(key)) }
                answer(StoreResponse(snapshot.response))
            case .cacheThenNetwork:
                guard let cached, let snapshot = cached.snapshot else { return readLevel(0, for: .cacheThenNetwork) }
                if let events = store.events { events(.heldValueRead(key)) }
                answer(StoreResponse(snapshot.response))
                if !cached.fresh { startFetch() }
            case .networkFirst, .networkOnly:
                startFetch()
            }
        }

        /// The read's turn came, after the changes asked before it: it goes on (once; changes asked after it do not
        /// hold it again).
        @inlinable
        func afterTurn() {
            hasWaited = true
            start()
        }

        /// ``start()`` for a key the store did not hold a moment ago, which it need not look at again: the levels
        /// are read (or, for a network policy, the fetch begins), and what the store learned meanwhile is found there.
        @inlinable
        func startWithNothingHeld() {
            switch policy.kind {
            case .cacheFirst, .cacheOnly:
                // The store held nothing: a value it confirms before the read's fetch begins is the answer.
                since = Machine.ReadStamp(generation: 0, confirmedVersion: 0, staleMark: 0)
                readLevel(0, for: .cache)
            case .cacheThenNetwork: readLevel(0, for: .cacheThenNetwork)
            case .networkFirst, .networkOnly: startFetch()
            }
        }

        /// Cancels the read while it has not answered; once it has, what it still does (the fetch of a
        /// cache-then-network read) goes on.
        @inlinable
        func cancel() {
            typealias Left = (garbage: [Any], cancel: (any CancellationToken)?, stop: (@Sendable () -> Void)?)
            let (taken, left) = store.locked(key) { machine, slot -> (HandedCompletion<StoreResponse<Value>>?, Left?) in
                guard !isCancelled, onFailure != nil || self.completion != nil else { return (nil, nil) }
                isCancelled = true
                let left = joinedFetch.map { machine.leaveFetch($0.id, caller: $0.caller, of: slot) }
                joinedFetch = nil
                return (self.completion.take(), (left?.garbage ?? [], left?.cancel, stopLevelRead.take()))
            }
            left?.cancel?.cancel()
            left?.stop?()
            withExtendedLifetime((taken, left?.garbage)) {}  // released after unlocking
        }

        // MARK: Answering

        @inlinable
        func answer(_ response: StoreResponse<Value>) {
            guard onFailure == nil else { return }
            let completion = store.locked { _ in self.completion.take() }
            completion?.call(.success(response))
        }

        @inlinable
        func fail(_ error: any Error) {
            if let onFailure {
                if !store.locked({ _ in isCancelled }) { onFailure(error) }
                return
            }
            let completion = store.locked { _ in self.completion.take() }
            completion?.call(.failure(error))
        }

        /// Attaches `error` to the key's shown value and answers with it, or fails when nothing is shown.
        @inlinable
        func reportOrFail(_ error: any Error) {
            guard let snapshot = store.locked(key, { $0.attach(error, to: $1) }) else { return fail(error) }
            store.publish(snapshot)
            answer(StoreResponse(snapshot.response))
        }

        // MARK: Reading the levels

        /// Reads level `index` on the caller's thread (each next one on the thread the previous one completed on),
        /// unless the store knows better (see ``StoreMachine/beginLevelRead(_:level:)``).
        @inlinable
        func readLevel(_ index: Int, for purpose: Purpose) {
            guard index < store.levels.count else { return levelsDone(nil, for: purpose) }
            let begun = store.locked(key) { machine, slot -> Machine.LevelRead? in
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
                return levelsDone(taken ? snapshot.map { StoreResponse($0.response) } : nil, for: purpose)
            case .read:
                let stop = store.levels[index].read(key) { [self] result in levelAnswered(result) }
                // A level that can stop early (an async one) is told when the read is cancelled.
                guard let stop else { return }
                let cancelled = store.locked { _ -> Bool in
                    guard !isCancelled else { return true }
                    stopLevelRead = stop
                    return false
                }
                if cancelled { stop() }
            }
        }

        /// A level answered: a hit the read takes is confirmed in order with the key's changes; otherwise the read
        /// goes on, unless the store learned a value meanwhile (a fetch that answered), which is the answer.
        @inlinable
        func levelAnswered(_ result: Result<CachedValue<Value>, any Error>) {
            var invalidated = !inStep  // whether a value the read does not take may be stale for more than its age
            // A hit from a level behind the store (its write not issued yet) is older than what the store holds.
            if inStep, case .success(let cached) = result, !store.locked({ _ in isCancelled }) {
                // The invalidations are judged here, outside the lock: a predicate is the caller's code.
                let staleSince = rules?.staleSince(key, savedAt: cached.savedAt)
                invalidated = staleSince != nil
                if takes(cached.savedAt, stale: staleSince != nil, for: purpose) {
                    if case .cacheThenNetwork = purpose {
                        holdsKey = true
                        store.locked(key) { $0.holdKey($1) }
                    }
                    let error: (any Error)? = if case .fallback(let error) = purpose { error } else { nil }
                    let hit = Machine.Job.hit(
                        cached.boxed, level: level, stamp: stamp, staleSince: staleSince, error: error,
                        reply: { [self] snapshot in hitConfirmed(snapshot) })
                    return store.submit(hit, for: key)
                }
            }
            // A miss of the last level begins the fetch under the same lock, keeping the key in use.
            let fetches = level + 1 == store.levels.count && fetchesOnMiss(purpose)
            let (miss, cancelled) = store.locked(key) { machine, slot -> (Machine.LastLevelMiss, Bool) in
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
                if case .starts(let fetch, _) = begun, store.wrapsFetches {
                    store.noteLevelAnswer(result, of: level, invalidated: invalidated, beforeFetch: fetch)
                }
                fetchBegun(begun)
            case .learned(let learned):
                // What the store learned answers (no value too, after a removal), unless it is a value too old.
                if let learned, takes(learned, for: purpose) ?? true {
                    return levelsDone(StoreResponse(learned.response), for: purpose)
                }
                readLevel(level + 1, for: purpose)
            }
        }

        /// A removal or a clear overtook the read's fetch: the answer is what the key has after it, as a cache-only
        /// read finds it (what the store holds, else what its levels hold, written since), no value when none. The key
        /// may have fallen out of use meanwhile, so the store alone cannot say.
        @inlinable
        func answerAfterRemoval() {
            guard onFailure == nil else { return }
            let after = PolicyRun(store: store, key: key, policy: .cacheOnly, onFailure: nil)
            _ = after.begin(
                HandedCompletion { [self] result in
                    answer((try? result.get()) ?? store.shownResponse(key))
                })
        }

        /// Whether the read fetches when the levels miss.
        @inlinable
        func fetchesOnMiss(_ purpose: Purpose) -> Bool {
            switch purpose {
            case .cache: policy.kind != .cacheOnly
            case .cacheThenNetwork: true
            case .fallback: false
            }
        }

        @inlinable
        func hitConfirmed(_ snapshot: Machine.Snapshot) {
            if !store.locked({ _ in isCancelled }) { levelsDone(StoreResponse(snapshot.response), for: purpose) }
            if holdsKey {
                holdsKey = false
                _ = store.locked(key) { $0.endLevelRead($1) }  // the fetch, if any, holds the key now
            }
        }

        /// Whether the read takes the value `snapshot` shows (see ``takes(_:stale:for:)``); `nil` when it shows none.
        @inlinable
        func takes(_ snapshot: Machine.Snapshot, for purpose: Purpose) -> Bool? {
            snapshot.confirmed.savedAt.map { takes($0, stale: snapshot.isStale, for: purpose) }
        }

        /// Whether the read takes a level's value saved at `savedAt`: a cache-first read, a fresh one; the others
        /// any.
        @inlinable
        func takes(_ savedAt: Date, stale: Bool, for purpose: Purpose) -> Bool {
            guard case .cache = purpose else { return true }
            return store.takes(savedAt, stale: stale, under: policy)
        }

        /// The levels were read: `hit` is what the key shows after the hit they gave, or `nil` when none did.
        @inlinable
        func levelsDone(_ hit: StoreResponse<Value>?, for purpose: Purpose) {
            switch purpose {
            case .cache:
                if let hit { return answer(hit) }
                if policy.kind == .cacheOnly { return fail(CacheMiss.absent) }
                startFetch()
            case .cacheThenNetwork:
                // The fetch goes on after a hit, unless the hit is fresh.
                if let hit { answer(hit) }
                let fresh = hit != nil && store.locked(key) { $0.isFresh($1, under: policy, now: began) }
                if !fresh { startFetch() }
            case .fallback(let error):
                if let hit, hit.error != nil { answer(hit) } else { reportOrFail(error) }
            }
        }

        // MARK: Fetching

        /// Joins the key's fetch in flight, or starts one on this thread. A read whose levels missed passes the
        /// stamp of its first level read: a value the store learned since is the answer, and no fetch starts.
        @inlinable
        func startFetch() {
            let begun = store.locked(key) { machine, slot -> Machine.FetchStart? in
                guard !isCancelled else { return nil }
                if asked == nil { asked = machine.readStamp }
                let begun = machine.beginFetch(slot, joining: true, since: since, asked: asked) { [self] in fetched($0)
                }
                joinedFetch = begun.joinedFetch
                return begun
            }
            if let begun { fetchBegun(begun) }
        }

        /// The read joined a fetch, or began one, which it starts; or the store had the answer.
        @inlinable
        func fetchBegun(_ begun: Machine.FetchStart) {
            switch begun {
            case .answered(let snapshot): return fetched(.success(snapshot))
            case .joined(let id, _):
                if let events = store.events { events(.fetchJoined(key, fetch: id)) }
                return
            case .starts(let fetch, _): startedFetch = fetch
            }
            // The load's completion captures the read alone: no storage of its own.
            let token = store.loadUpstream(startedFetch, of: key) { [self] result in
                store.fetchEnded(startedFetch, of: key, with: result)
            }
            store.locked(key) { $0.keepToken(token, ofFetch: startedFetch, for: $1) }?.cancel()
        }

        /// The fetch answered: with its value, with the shown one when a removal or a clear dropped it, or with a
        /// failure, shown attached to a value when there is one (networkFirst looks in the levels first).
        @inlinable
        func fetched(_ result: Result<Machine.Snapshot, any Error>) {
            switch result {
            case .success(let snapshot):
                answer(StoreResponse(snapshot.response))
            case .failure(let error as StoreError) where error == .discarded:
                answerAfterRemoval()
            case .failure(let error):
                // The read answers as of its fetch's failure: after the changes of the key asked before it, which it
                // waits for when they are still queued.
                guard !store.locked(key, { $0.awaitTurn(of: $1, then: { [self] in fallBack(from: error) }) }) else {
                    return
                }
                fallBack(from: error)
            }
        }

        /// What the read answers when its fetch failed: the value shown with the error (unless it asked for the
        /// network first), else the levels' value, else the failure.
        @inlinable
        func fallBack(from error: any Error) {
            if policy.kind != .networkFirst, store.locked(key, { $0.showsSomething($1) }) { return reportOrFail(error) }
            readLevel(0, for: .fallback(error))
        }
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
