#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
