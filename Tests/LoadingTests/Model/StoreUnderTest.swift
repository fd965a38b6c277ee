import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport

/// The real ``Store`` a history runs on: two levels that answer at once (a memory level and a disk level, which the
/// history can make fail), a network whose requests the history answers one by one, and a clock it moves. It records
/// what each observer was shown, what each caller was answered and what each level holds, as ``StoreModel`` does.
/// Every other observer watches the key's states (``Store/states(for:)``) rather than its changes: both show what the
/// key shows.
final class StoreUnderTest: ModelCheck.System {
    private let clock = TestClock()
    private let levels: [ModelLevel<Items>]
    private let network = KeyedLoaderSpy<String, Items>()
    private let connectivity = ManualConnectivity()
    let store: Store<String, Items>
    private var observers: [Int: Observer] = [:]
    private var observerCount = 0
    private let reads = Locked<[Int: [Answer]]>([:])
    private var readCount = 0
    private var commits: [Int: (spy: LoaderSpy<Void>, token: any CancellationToken)] = [:]
    private let outcomes = Locked<[Int: String]>([:])
    private var mutationCount = 0
    private var keysSeen: Set<String> = []

    init(network mode: ModelNetwork = .always, keepsValues: Bool = true, levelMaxAge: Int? = nil) {
        let clock = clock
        levels = [ModelLevel(clock: clock, maxAge: levelMaxAge), ModelLevel(clock: clock, maxAge: levelMaxAge)]
        let network = network
        let networkMode: NetworkMode =
            switch mode {
            case .always: .always
            case .waitsForNetwork: .waitsForNetwork(connectivity)
            case .answersFromCache: .answersFromCache(connectivity)
            }
        store = Store(
            levels: [.cache(levels[0], name: "memory"), .cache(levels[1], name: "disk")],
            fetch: LoaderFamily { network[$0] }, keptValues: keepsValues ? nil : 0, network: networkMode,
            now: { clock.now })
    }

    deinit {
        // The history is over. Each request and commit left unanswered holds the store until it answers, as a real
        // one does: the commits are cancelled, then the requests fail, so that the store goes with the history (the
        // fetches waiting for the network send theirs first).
        store.clear()
        connectivity.setOnline(true)
        while let key = keysSeen.first(where: { !network[$0].pendingRequests.isEmpty }) {
            for request in network[key].pendingRequests { network.fail(key, with: TestError.model, at: request) }
        }
    }

    func apply(_ step: Step) {
        switch step {
        case .write(let key, let items): store.write(items, for: key)
        case .update(let key, let edit): store.update(key) { edit.applied(to: $0) }
        case .mutate(let key, let edit): mutate(key, edit)
        case .settle(let mutation, let settlement): settle(mutation, settlement)
        case .remove(let key): store.remove(key)
        case .clear: store.clear()
        case .invalidate(let key): store.invalidate(key)
        case .invalidateWhere(let keys): store.invalidate { keys.contains($0) }
        case .invalidateAll: store.invalidateAll()
        case .revalidate: store.revalidate()
        case .read(let key, let policy): read(key, policy)
        case .refresh(let key): refresh(key)
        case .observe(let key):
            observerCount += 1
            observers[observerCount] =
                observerCount.isMultiple(of: 2)
                ? .states(StreamRecorder(store.states(for: key))) : .changes(StreamRecorder(store.changes(for: key)))
        case .stopObserving(let observer):
            observers[observer]?.cancel()
            observers[observer] = nil
        case .answer(let key, let request, let items): network.complete(key, with: items, at: request)
        case .fail(let key, let request): network.fail(key, with: TestError.model, at: request)
        case .updateWhile(let key, let edit, let during):
            // Held the first time its transform runs (a fetch in flight applies it again).
            let store = store
            ModelCheck.whileAChangeRuns { hold in
                store.update(key) { value in
                    hold()
                    return edit.applied(to: value)
                }
            } during: {
                apply(during)
            }
        case .advanceClock(let seconds): clock.advance(by: TimeInterval(seconds))
        case .levelsFail(let failing): for level in levels { level.fails = failing }
        case .connectivity(let online): connectivity.setOnline(online)
        }
        switch step {
        case .write(let key, _), .update(let key, _), .mutate(let key, _), .remove(let key), .invalidate(let key),
            .read(let key, _), .refresh(let key), .observe(let key), .answer(let key, _, _), .fail(let key, _),
            .updateWhile(let key, _, _):
            keysSeen.insert(key)
        case .invalidateWhere(let keys): keysSeen.formUnion(keys)
        default: break
        }
    }

    var checkpoint: Checkpoint {
        var checkpoint = Checkpoint()
        for (number, observer) in observers { checkpoint.observers[number] = observer.shown }
        checkpoint.reads = reads.withLock { $0 }
        checkpoint.mutations = outcomes.withLock { $0 }
        checkpoint.levels = levels.map(\.contents)
        for key in keysSeen where network.loadCount(for: key) > 0 {
            checkpoint.requests[key] = network.loadCount(for: key)
        }
        return checkpoint
    }

    private func read(_ key: String, _ policy: ModelPolicy) {
        readCount += 1
        let read = readCount
        reads.withLock { $0[read] = [] }
        _ = store.read(key, policy: policy.storePolicy).load { [reads] result in
            reads.withLock { $0[read, default: []].append(Answer(result)) }
        }
    }

    private func refresh(_ key: String) {
        readCount += 1
        let read = readCount
        reads.withLock { $0[read] = [] }
        store.freshValue(of: key).load { [reads] result in
            reads.withLock { $0[read, default: []].append(Answer(result)) }
        }
    }

    private func mutate(_ key: String, _ edit: Edit) {
        mutationCount += 1
        let mutation = mutationCount
        let spy = LoaderSpy<Void>()
        let change: @Sendable (Items?) -> Items? = { edit.applied(to: $0) }
        let token = store.mutate(key, change, commit: spy) { [outcomes] result in
            let outcome: String
            switch result {
            case .success: outcome = "accepted"
            case .failure(let error as StoreError) where error == .cleared: outcome = "cleared"
            case .failure: outcome = "refused"
            }
            outcomes.withLock { $0[mutation] = outcome }
        }
        commits[mutation] = (spy, token)
    }

    private func settle(_ mutation: Int, _ settlement: Settlement) {
        guard let (spy, token) = commits[mutation] else { return }
        switch settlement {
        case .accept: spy.complete(with: ())
        case .refuse: spy.fail(with: TestError.model)
        case .cancel: token.cancel()
        }
    }
}

extension Answer {
    init(_ result: Result<StoreResponse<Items>, any Error>) {
        switch result {
        case .success(let response):
            self = .shown(
                Shown(value: response.value, hasPendingChanges: response.hasPendingChanges),
                withError: response.error != nil)
        case .failure:
            self = .failed
        }
    }
}

/// A level that answers at once, stamps what it saves with the history's clock, and fails its saves and removals
/// while told to (a full disk).
final class ModelLevel<Value: Sendable>: KeyedCache {
    private let values = Locked<[String: CachedValue<Value>]>([:])
    private let failing = Locked(false)
    private let clock: TestClock
    /// A slow level answers on a queue of its own, a moment later, in the order it was asked.
    private let slowness: DispatchQueue?
    /// The operations of a slow level not answered yet.
    private let inFlight = DispatchGroup()

    init(clock: TestClock, slow: Bool = false, maxAge: Int? = nil) {
        self.clock = clock
        slowness = slow ? DispatchQueue(label: "ModelLevel") : nil
        expiry = maxAge.map { .maxAge(.seconds($0)) } ?? .never
    }

    /// How long the level serves what it holds.
    let expiry: CacheExpiry<Value>

    /// Whether every operation asked of it has answered.
    var isIdle: Bool { inFlight.wait(timeout: .now()) == .success }

    /// Waits until every operation asked of a slow level has answered.
    func waitUntilIdle() {
        inFlight.wait()
    }

    /// Runs `operation` now, or a moment later on the level's queue when it is slow.
    private func perform(_ operation: @escaping @Sendable () -> Void) {
        guard let slowness else { return operation() }
        inFlight.enter()
        slowness.async { [inFlight] in
            jitter(upTo: 25_000)
            operation()
            inFlight.leave()
        }
    }

    var contents: [String: Value] { values.withLock { $0.mapValues(\.value) } }

    var fails: Bool {
        get { failing.withLock { $0 } }
        set { failing.withLock { $0 = newValue } }
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void) {
        perform { [values, clock, expiry] in
            guard let value = values.withLock({ $0[key] }) else { return completion(.failure(CacheMiss.absent)) }
            guard expiry.isFresh(value.value, savedAt: value.savedAt, now: clock.now) else {
                return completion(.failure(CacheMiss.expired(savedAt: value.savedAt)))
            }
            completion(.success(value))
        }
    }

    func save(_ value: Value, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard !fails else { return completion(.failure(TestError.model)) }
        let now = clock.now
        perform { [values] in
            values.withLock { $0[key] = CachedValue(value, savedAt: now) }
            completion(.success(()))
        }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard !fails else { return completion(.failure(TestError.model)) }
        perform { [values] in
            values.withLock { $0[key] = nil }
            completion(.success(()))
        }
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        perform { [values] in
            values.withLock { $0 = [:] }
            completion(.success(()))
        }
    }
}

/// An observer of a key: of its changes, or of its states.
private enum Observer {
    case changes(StreamRecorder<StoreResponse<Items>, Never>)
    case states(StreamRecorder<StoreState<Items>, Never>)

    /// What the observer was shown last.
    var shown: Shown {
        switch self {
        case .changes(let recorder):
            let last = recorder.values.last
            return Shown(value: last?.value, hasPendingChanges: last?.hasPendingChanges ?? false)
        case .states(let recorder):
            let last = recorder.values.last
            return Shown(value: last?.value, hasPendingChanges: last?.hasPendingChanges ?? false)
        }
    }

    func cancel() {
        switch self {
        case .changes(let recorder): recorder.cancel()
        case .states(let recorder): recorder.cancel()
        }
    }
}
