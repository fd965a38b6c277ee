#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store.PolicyRun {
    // MARK: Reading the levels

    /// Reads level `index` on the caller's thread (each next one on the thread the previous one completed on),
    /// unless the store knows better (see ``StoreMachine/beginLevelRead(_:level:)``).
    @inlinable
    func readLevel(_ index: Int, for purpose: Purpose) {
        guard index < store.levels.count else { return levelsDone(nil, for: purpose) }
        let begun = store.locked(key) { machine, slot -> StoreMachine.LevelRead? in
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
                let hit = StoreMachine.Job.hit(
                    cached.boxed, level: level, stamp: stamp, staleSince: staleSince, error: error,
                    reply: { [self] snapshot in hitConfirmed(snapshot) })
                return store.submit(hit, for: key)
            }
        }
        // A miss of the last level begins the fetch under the same lock, keeping the key in use.
        let fetches = level + 1 == store.levels.count && fetchesOnMiss(purpose)
        let ((miss, cancelled), object) = store.lockedKeeping(key) {
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
            if case .starts(let fetch, _) = begun, store.wrapsFetches {
                store.noteLevelAnswer(result, of: level, invalidated: invalidated, beforeFetch: fetch)
            }
            fetchBegun(begun, object: object)
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
        let after = Store.PolicyRun(store: store, key: key, policy: .cacheOnly, onFailure: nil)
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
    func hitConfirmed(_ snapshot: StoreMachine.Snapshot) {
        if !store.locked({ _ in isCancelled }) { levelsDone(StoreResponse(snapshot.response), for: purpose) }
        if holdsKey {
            holdsKey = false
            _ = store.locked(key) { $0.endLevelRead($1) }  // the fetch, if any, holds the key now
        }
    }

    /// Whether the read takes the value `snapshot` shows (see ``takes(_:stale:for:)``); `nil` when it shows none.
    @inlinable
    func takes(_ snapshot: StoreMachine.Snapshot, for purpose: Purpose) -> Bool? {
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
        let (begun, object) = store.lockedKeeping(key) { machine, slot -> StoreMachine.FetchStart? in
            guard !isCancelled else { return nil }
            if asked == nil { asked = machine.readStamp }
            let begun = machine.beginFetch(slot, joining: true, since: since, asked: asked) { [self] in fetched($0)
            }
            joinedFetch = begun.joinedFetch
            return begun
        }
        if let begun { fetchBegun(begun, object: object) }
    }

    /// The read joined a fetch, or began one, which it starts; or the store had the answer. `object` is the key's,
    /// from the event that began the fetch.
    @inlinable
    func fetchBegun(_ begun: StoreMachine.FetchStart, object: StoreKeyRef?) {
        switch begun {
        case .answered(let snapshot): return fetched(.success(snapshot))
        case .joined(let id, _):
            if let events = store.events { events(.fetchJoined(key, fetch: id)) }
            return
        case .starts(let fetch, _):
            store.engine.startUpstream(fetch, of: object ?? StoreKeyRef(object: StoreKey(key), hash: key.hashValue))
        }
    }

    /// The fetch answered: with its value, with the shown one when a removal or a clear dropped it, or with a
    /// failure, shown attached to a value when there is one (networkFirst looks in the levels first).
    @inlinable
    func fetched(_ result: Result<StoreMachine.Snapshot, any Error>) {
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
