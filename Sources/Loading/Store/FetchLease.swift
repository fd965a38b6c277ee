#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A lease on fetching a key, shared by processes (the instances of a service): the process that takes it fetches,
/// the others wait for its value to reach the level they share. A row in a database table, an advisory lock.
public protocol FetchLease<Key>: Sendable {
    /// The type of the keys.
    associatedtype Key: Hashable & Sendable

    /// Takes the lease of `key` for `duration`, unless another process holds it; returns whether this one does now.
    func acquire(_ key: Key, for duration: Duration) async throws -> Bool

    /// Gives back the lease of `key` this process holds: the store calls it once the value it fetched under the
    /// lease reached the shared level (its save there ended, even past the level's timeout), or at once when the
    /// fetch failed with a failure the coordination does not share (one it shares goes to
    /// ``release(_:leaving:for:)``).
    func release(_ key: Key) async throws

    /// Gives back the lease of `key` this process holds, leaving `failure` on it for `duration`: until then no process
    /// takes the lease (this one included), and ``failure(of:)`` answers `failure`. The store calls it when a fetch
    /// under the lease failed with a failure its ``FetchFailureSharing`` describes. A lease that keeps no failure
    /// gives the lease back (the default).
    func release(_ key: Key, leaving failure: String, for duration: Duration) async throws

    /// The failure a holder of `key`'s lease left on it, while it lasts; `nil` otherwise (the default).
    func failure(of key: Key) async throws -> String?
}

extension FetchLease {
    /// Gives the lease back, keeping no failure.
    public func release(_ key: Key, leaving failure: String, for duration: Duration) async throws {
        try await release(key)
    }

    /// No failure: this lease keeps none.
    public func failure(of key: Key) async throws -> String? { nil }
}

/// Which failures of a fetch under a ``FetchLease`` the processes share, and for how long: a process that fetches a
/// key and fails leaves a description of the failure on the lease, and every process that asks for the lease while
/// it lasts fails with the failure the description gives back, without fetching (a key the upstream does not know, an
/// upstream that stopped answering, asked once per window for them all).
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared", timeout: .seconds(1))],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     coordination: .lease(
///         quoteLeases, sharedLevel: "shared", waiting: .seconds(10),
///         failures: FetchFailureSharing(
///             for: .seconds(5), describe: { $0 is UnknownSymbol ? "unknown symbol" : nil },
///             restore: { _ in UnknownSymbol() })))
/// ```
public struct FetchFailureSharing: Sendable {
    let window: Duration
    let describe: @Sendable (any Error) -> String?
    let restore: @Sendable (String) -> any Error

    /// Shares for `window` the failures `describe` gives a description of (`nil`: a failure the next fetch may not
    /// meet, kept by nobody), turned back into errors by `restore` in the processes that read them.
    public init(
        for window: Duration, describe: @escaping @Sendable (any Error) -> String?,
        restore: @escaping @Sendable (String) -> any Error
    ) {
        self.window = window
        self.describe = describe
        self.restore = restore
    }
}

/// How a ``Store``'s fetches are coordinated with other processes over a level they share, so that a key missing
/// everywhere is fetched once, not once per process.
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared", timeout: .seconds(1))],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     coordination: .lease(quoteLeases, sharedLevel: "shared"))
/// ```
///
/// Before a fetch goes upstream, the store takes the key's lease. Holding it, it reads the shared level once more (the
/// previous holder may have saved the value and given the lease back since the read missed), then fetches, and gives
/// the lease back once the value reached the shared level, or at once when the fetch failed, leaving the failure on
/// it when the coordination shares it (a lease whose process died lapses after `holding`). A save the level's timeout
/// gave up on may still land (a busy database answers it late): the lease waits for its real end, so that a waiting
/// process finds the value rather than fetching again. When another process holds it, the store reads the shared
/// level every `polling`, for at most `waiting`. Either way, a newer value found there is the fetch's answer, with its date and its level as its
/// origin, saved to the faster levels only: newer means saved since the fetch began, or, when the read that started
/// the fetch found the shared level's value too old (or found none), saved after that value. At each of those reads the
/// store asks for the lease again: one its holder gave back, or let lapse by dying, is taken, and the store fetches
/// (a dead holder costs the others `holding` at most). Past `waiting`, or when the lease cannot be reached, the store
/// fetches itself: a lease never fails a read, it only spares fetches, unless the processes share failures
/// (`failures:`): then a fetch that fails leaves its failure on the lease for a window, and every read that would
/// fetch the key meanwhile, in any process, fails with it (before a wait, and at each look of one). Give `waiting`
/// longer than a fetch takes at most (its timeout, its retries included): the waiters then get the holder's value or
/// its failure, and an upstream that stopped answering is asked by one process per window.
/// "Saved since" is judged by the processes' clocks (the holder's store dates the value): when the holder's clock is
/// behind by more than a fetch takes, the waiting process may not take the value and fetches after `waiting`: a second
/// upstream call, never an old answer.
///
/// Every call of the lease is bounded by `timeout` (the shared level's own timeout unless given): a lease that does
/// not answer by then counts as one that cannot be reached, so a database that stops answering delays a miss by at
/// most that much at the lease, and a lease such a call takes after all is given back. Without a `timeout` of its
/// own, the first call of a fetch whose read of the shared level answered (a value too old, or none) gets `waiting`
/// when that is longer: the database is up, and a call slower than the level's timeout is a machine too busy to keep
/// up, not an outage; counted as unreachable, it would cost a second upstream call.
public struct FetchCoordination<Key: Hashable & Sendable>: Sendable {
    let acquire: @Sendable (Key) async throws -> Bool
    let release: @Sendable (Key) async throws -> Void
    let releaseLeaving: @Sendable (Key, String, Duration) async throws -> Void
    let failure: @Sendable (Key) async throws -> String?
    let failures: FetchFailureSharing?
    let sharedLevel: String
    let waiting: Duration
    let polling: Duration
    /// How long a call of the lease may take; `nil`: the shared level's timeout.
    let timeout: Duration?

    /// Fetches coordinated by `lease`, whose holder's values the others wait for in the level named `sharedLevel`.
    /// - Parameters:
    ///   - lease: the lease the processes share.
    ///   - sharedLevel: the name of the store's level the processes share, where the holder's value arrives (a store
    ///     without a level of that name stops at its creation: a programming error).
    ///   - holding: how long a lease lasts when its process does not give it back (it died): longer than a fetch.
    ///   - waiting: how long a process that does not hold the lease waits for the value before fetching itself.
    ///   - polling: how often it reads the shared level meanwhile.
    ///   - timeout: how long each call of the lease may take (`acquire`, `release`): an acquire that has not answered
    ///     by then counts as a lease that cannot be reached (the store fetches itself, and gives back a lease the
    ///     call takes later), a release is given up (the lease lapses after `holding`). `nil`: the shared level's
    ///     timeout (`StoreLevel.cache(_:name:timeout:scheduler:)`), or `waiting` for a fetch's first acquire when the
    ///     shared level just answered its read; a level without a timeout leaves the calls unbounded.
    ///   - failures: the failures of a fetch the processes share through the lease (`nil`: none; a process whose
    ///     holder failed takes the lease and fetches itself).
    public static func lease(
        _ lease: some FetchLease<Key>, sharedLevel: String, holding: Duration = .seconds(10),
        waiting: Duration = .seconds(2), polling: Duration = .milliseconds(50), timeout: Duration? = nil,
        failures: FetchFailureSharing? = nil
    ) -> FetchCoordination {
        FetchCoordination(
            acquire: { key in try await lease.acquire(key, for: holding) },
            release: { key in try await lease.release(key) },
            releaseLeaving: { key, failure, window in try await lease.release(key, leaving: failure, for: window) },
            failure: { key in try await lease.failure(of: key) }, failures: failures,
            sharedLevel: sharedLevel, waiting: waiting, polling: polling, timeout: timeout)
    }
}

extension TypedStoreHooks {
    var coordinatedLevel: Int? { coordinator?.sharedLevel }

    /// What the read that starts fetch `id` found in the shared level and did not take (the date of its value, in
    /// seconds since the reference date; `-infinity` for none): a value saved there later is the fetch's answer too
    /// (see ``coordinatedLoad(_:of:object:in:under:completion:)``).
    func noteSharedLevelRead(_ found: Double, beforeFetch id: Int) {
        coordinator?.read(found, beforeFetch: id)
    }

    /// Fetch `id`'s upstream load under `coordinator`: answered by a newer value of the shared level (saved since the
    /// fetch began, or since the value its read found too old) when one arrives while another process holds the
    /// key's lease, or when this process takes it (the holder may have given it back just now); fetched by this
    /// process otherwise. Such an answer keeps its date and its level.
    func coordinatedLoad(
        _ id: Int, of key: Key, object: StoreKeyRef, in engine: StoreEngine, under coordinator: FetchCoordinator<Key>,
        completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        let pending = PendingLoad(completion)
        let newer = NewerThan(began: now(), read: coordinator.takeRead(beforeFetch: id))
        let shared = coordinator.sharedLevel
        // The task is the load's first step; the upstream load, when it starts, its second.
        pending.startStep {
            let task = Task { [self] in
                let asked = ContinuousClock.now
                var failure: String?
                let (answer, holds, outcome): (CachedValue<Value>?, Bool, CoordinationOutcome)
                // The shared level answered the read that began the fetch: its database is up.
                switch await coordinator.acquire(key, levelAnswered: newer.read != nil) {
                case true?:
                    (answer, holds, outcome) = (
                        await sharedValue(of: key, in: shared, newerThan: newer), true, .acquired
                    )
                case false?:
                    switch await awaitHolder(of: key, in: shared, newerThan: newer, under: coordinator) {
                    case .taken(let value): (answer, holds, outcome) = (value, true, .takenOver)
                    case .answered(let value): (answer, holds, outcome) = (value, false, .answeredByHolder)
                    case .failed(let left):
                        (answer, holds, outcome) = (nil, false, .failedBefore)
                        failure = left
                    case .waitedOut: (answer, holds, outcome) = (nil, false, .waitedOut)
                    }
                // An unreachable lease: fetch at once (its database may be the shared level's too, and another read
                // of that level would cost the miss one more timeout), and give back after the save what the call
                // may have taken without its answer reaching here.
                case nil: (answer, holds, outcome) = (nil, true, .unreachable)
                }
                if let events, !Task.isCancelled {
                    events(.fetchCoordinated(key, fetch: id, outcome: outcome, duration: ContinuousClock.now - asked))
                }
                if let answer {
                    if holds { Task { await coordinator.release(key) } }
                    engine.run(object) {
                        $0.fetchAnsweredByLevel(id, of: $1, level: shared, savedAt: answer.savedAt)
                    }
                    return pending.complete(.success(ValueBox(answer.value)))
                }
                if let failure, let failures = coordinator.coordination.failures {
                    return pending.complete(.failure(failures.restore(failure)))
                }
                guard !Task.isCancelled else {
                    if holds { Task { await coordinator.release(key) } }
                    return
                }
                pending.startStep {
                    callUpstream(id, of: key, object: object, in: engine) { result in
                        if holds {
                            // Given back once the value reached the shared level: a process that takes the lease
                            // then finds it there. A failure has nothing to wait for: it is left on the lease when
                            // the processes share it.
                            switch result {
                            case .success:
                                coordinator.add({ Task { await coordinator.release(key) } }, afterNextSaveOf: key)
                            case .failure(let error):
                                Task { await coordinator.release(key, failedWith: error) }
                            }
                        }
                        pending.complete(result)
                    }
                }
            }
            return AnyCancellationToken { task.cancel() }
        }
        return pending
    }

    /// Waits for the holder of `key`'s lease: a newer value of `key` in level `index`, read every `polling` for at
    /// most `waiting`, with the lease asked for again at each look (its holder may have given it back, or died and let
    /// it lapse), and the failure a holder left on it looked at before each wait.
    private func awaitHolder(
        of key: Key, in index: Int, newerThan newer: NewerThan, under coordinator: FetchCoordinator<Key>
    ) async -> HolderWait<Value> {
        let coordination = coordinator.coordination
        let deadline = ContinuousClock.now + coordination.waiting
        if let failure = await coordinator.failure(of: key) { return .failed(failure) }
        while ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: coordination.polling)
            } catch {
                return .waitedOut
            }
            if let cached = await sharedValue(of: key, in: index, newerThan: newer) { return .answered(cached) }
            if await coordinator.acquire(key) == true {
                return .taken(await sharedValue(of: key, in: index, newerThan: newer))
            }
            if let failure = await coordinator.failure(of: key) { return .failed(failure) }
        }
        return .waitedOut
    }

    /// The value of `key` in level `index`, when it is newer than what the fetch needs.
    private func sharedValue(of key: Key, in index: Int, newerThan newer: NewerThan) async -> CachedValue<Value>? {
        let level = levels[index]
        let cached = await withCheckedContinuation { (read: CheckedContinuation<CachedValue<Value>?, Never>) in
            _ = level.read(key) { result in read.resume(returning: try? result.get()) }
        }
        guard let cached, newer.accepts(cached.savedAt) else { return nil }
        return cached
    }
}

/// How a wait for the holder of a key's lease ended.
private enum HolderWait<Value: Sendable> {
    /// The holder's value arrived in the shared level.
    case answered(CachedValue<Value>)
    /// This process took the lease (given back, or lapsed), and found this in the shared level right after.
    case taken(CachedValue<Value>?)
    /// A holder's fetch failed and left this description on the lease.
    case failed(String)
    /// Nothing came within `waiting`, or the wait was cancelled.
    case waitedOut
}

/// What a coordinated fetch takes from the shared level: a value saved since it began, or one newer than what its
/// read found there (`nil`: nothing is known of it; `-infinity`: the read found nothing).
private struct NewerThan {
    let began: Date
    let read: Double?

    func accepts(_ savedAt: Date) -> Bool {
        savedAt >= began || read.map { savedAt.timeIntervalSinceReferenceDate > $0 } ?? false
    }
}

/// A store's side of its ``FetchCoordination``: the shared level, what it answered the reads that start fetches, and
/// the leases to give back once a save of their key reached it (or it was emptied).
final class FetchCoordinator<Key: Hashable & Sendable>: Sendable {
    let coordination: FetchCoordination<Key>
    /// The index of the shared level in the store's levels.
    let sharedLevel: Int
    /// By fetch: the date of the value the shared level answered the fetch's read (seconds since the reference
    /// date; `-infinity` for none). Taken when the fetch's upstream load starts.
    private let reads = Locked<[Int: Double]>([:])
    private let releases = Locked<[Key: [@Sendable () -> Void]]>([:])
    /// The leases this process took and has not given back, by key: how many times (its fetches of a key may take
    /// the key's lease again), and how many it is giving back now, for a shutdown to hand them all back (a release
    /// under way may not have reached the lease yet).
    private let held = Locked<(taken: [Key: Int], givingBack: [Key: Int])>(([:], [:]))

    /// How long a call of the lease may take.
    private let callTimeout: Duration?

    /// Coordinates the fetches of a store whose level `sharedLevel` the processes share; `levelTimeout` bounds the
    /// lease's calls unless the coordination says otherwise.
    init(_ coordination: FetchCoordination<Key>, sharedLevel: Int, levelTimeout: Duration?) {
        self.coordination = coordination
        self.sharedLevel = sharedLevel
        callTimeout = coordination.timeout ?? levelTimeout
    }

    /// Takes `key`'s lease: whether this process holds it now; `nil` when the lease could not be reached (it failed,
    /// or did not answer within the call timeout: a lease taken after that is given back). When the shared level
    /// answered the read that began the fetch (`levelAnswered`) and the coordination gives no timeout of its own, the
    /// lease's database is up and a slow call is load, not an outage: the call gets `waiting`, if longer.
    func acquire(_ key: Key, levelAnswered: Bool = false) async -> Bool? {
        let coordination = coordination
        let bound =
            if levelAnswered, coordination.timeout == nil, let callTimeout {
                max(callTimeout, coordination.waiting)
            } else {
                callTimeout
            }
        let taken = await boundedAnswer(
            within: bound, { try await coordination.acquire(key) },
            late: { [self] holds in if holds { Task { await giveBack(key) } } })
        if taken == true { held.withLock { $0.taken[key, default: 0] += 1 } }
        return taken
    }

    /// Gives `key`'s lease back, waiting at most the call timeout (it lapses otherwise).
    func release(_ key: Key) async {
        forget(key)
        await giveBack(key)
        gaveBack(key)
    }

    /// Gives `key`'s lease back after a fetch under it failed with `error`: leaving the failure on it for the window
    /// of the coordination's failure sharing when it describes `error`, plainly otherwise.
    func release(_ key: Key, failedWith error: any Error) async {
        guard let failures = coordination.failures, let failure = failures.describe(error) else {
            return await release(key)
        }
        forget(key)
        let coordination = coordination
        _ = await boundedAnswer(within: callTimeout) {
            try await coordination.releaseLeaving(key, failure, failures.window)
        }
        gaveBack(key)
    }

    /// The failure a holder left on `key`'s lease, while it lasts: `nil` when the processes share none, or the lease
    /// cannot be reached within the call timeout.
    func failure(of key: Key) async -> String? {
        guard coordination.failures != nil else { return nil }
        let coordination = coordination
        return await boundedAnswer(within: callTimeout) { try await coordination.failure(key) } ?? nil
    }

    /// Counts one lease of `key` fewer among those this process holds, and one more among those it is giving back.
    private func forget(_ key: Key) {
        held.withLock { held in
            held.givingBack[key, default: 0] += 1
            guard let count = held.taken[key] else { return }
            held.taken[key] = count > 1 ? count - 1 : nil
        }
    }

    /// A lease of `key` was given back (or the call gave up: the lease lapses).
    private func gaveBack(_ key: Key) {
        held.withLock { held in
            guard let count = held.givingBack[key] else { return }
            held.givingBack[key] = count > 1 ? count - 1 : nil
        }
    }

    /// Gives back every lease this process holds, at once and together, each call bounded by the call timeout: a
    /// store shutting down. A fetch that ends later gives its lease back again, which changes nothing; so does a
    /// release under way, which is made again here so that the lease is given back when this returns.
    func releaseAll() async {
        let keys = held.withLock { held in
            let keys = Set(held.taken.keys).union(held.givingBack.keys)
            held.taken = [:]
            return keys
        }
        await withTaskGroup(of: Void.self) { group in
            for key in keys { group.addTask { [self] in await giveBack(key) } }
        }
    }

    /// Calls the lease's release of `key`, waiting at most the call timeout.
    private func giveBack(_ key: Key) async {
        let coordination = coordination
        _ = await boundedAnswer(within: callTimeout) { try await coordination.release(key) }
    }

    /// Notes what the read that starts fetch `id` found in the shared level (see ``reads``).
    func read(_ found: Double, beforeFetch id: Int) {
        reads.withLock { $0[id] = found }
    }

    /// What the read that started fetch `id` found in the shared level, if it read it: taken once the fetch's
    /// upstream load starts.
    func takeRead(beforeFetch id: Int) -> Double? {
        reads.withLock { $0.removeValue(forKey: id) }
    }

    /// Runs `release` once the next save of `key` to the shared level ended.
    func add(_ release: @escaping @Sendable () -> Void, afterNextSaveOf key: Key) {
        releases.withLock { $0[key, default: []].append(release) }
    }

    /// A save of `key` ended: its leases are given back.
    func saved(_ key: Key) {
        guard let waiting = releases.withLock({ $0.removeValue(forKey: key) }) else { return }
        for release in waiting { release() }
    }

    /// The level was emptied (a clear): every lease is given back.
    func removedAll() {
        let waiting = releases.withLock { exchange(&$0, with: [:]) }
        for release in waiting.values.joined() { release() }
    }
}

extension StoreLevel {
    /// This level, telling `coordinator` as its saves and removals end.
    func runningAfterSaves(_ coordinator: FetchCoordinator<Key>) -> StoreLevel {
        StoreLevel(
            name: name,
            boxed: boxed.telling(
                { change, result in
                    // A save the level's timeout gave up on may still land: its leases wait for its real end.
                    let lateEnd = (result.failure as? LevelTimeoutError)?.lateEnd
                    let ended: @Sendable () -> Void =
                        switch change {
                        case .save(let key), .removal(let key): { coordinator.saved(StoreKey<Key>.key(of: key)) }
                        case .removalOfAll: { coordinator.removedAll() }
                        }
                    if let lateEnd { lateEnd.whenEnded(ended) } else { ended() }
                }, afterCompletion: true))
    }
}

/// The answer of `call`, or `nil` when it failed or did not answer within `timeout` (it is then cancelled, and `late`
/// is given an answer that comes after all). Without a timeout, `call` is awaited however long it takes.
func boundedAnswer<Answer: Sendable>(
    within timeout: Duration?, _ call: @escaping @Sendable () async throws -> Answer,
    late: @escaping @Sendable (Answer) -> Void = { _ in }
) async -> Answer? {
    guard let timeout else { return try? await call() }
    return await withCheckedContinuation { (continuation: CheckedContinuation<Answer?, Never>) in
        let first = FirstAnswer(continuation)
        let work = Task {
            let answer = try? await call()
            if !first.give(answer), let answer { late(answer) }
        }
        first.startTimer(
            Task {
                guard (try? await Task.sleep(for: timeout)) != nil, first.give(nil) else { return }
                work.cancel()
            })
    }
}

/// The first of a call's answer and its timeout, given to the caller waiting for it; the other is told it came late.
private final class FirstAnswer<Answer: Sendable>: Sendable {
    private let state: Locked<(continuation: CheckedContinuation<Answer?, Never>?, timer: Task<Void, Never>?)>

    init(_ continuation: CheckedContinuation<Answer?, Never>) {
        state = Locked((continuation, nil))
    }

    /// Keeps the timer, to stop it once the call answered (at once when it answered already).
    func startTimer(_ timer: Task<Void, Never>) {
        let answered = state.withLock { state in
            guard state.continuation != nil else { return true }
            state.timer = timer
            return false
        }
        if answered { timer.cancel() }
    }

    /// Gives `answer` to the caller unless an answer was given already; returns whether this one was.
    func give(_ answer: Answer?) -> Bool {
        let (continuation, timer) = state.withLock { state in
            (exchange(&state.continuation, with: nil), exchange(&state.timer, with: nil))
        }
        timer?.cancel()
        guard let continuation else { return false }
        continuation.resume(returning: answer)
        return true
    }
}
