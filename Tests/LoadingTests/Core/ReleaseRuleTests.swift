import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// The release rule: no lock is held while user code runs, and releasing a closure or a value is user code (its
/// captures' deinitializers run). Each test makes a deinitializer call back into the very object that drops it
/// (send to the same subject, fulfil the same future, cancel the same load) and fails, instead of hanging, when
/// that deadlocks.
final class ReleaseRuleTests: XCTestCase {
    // MARK: Loads

    func test_cancel_releasesCompletionOutsideTheLock_forEveryComposite() {
        for (name, compose) in composites {
            let upstream = LoaderSpy<Int>()
            let delivered = Locked(0)
            let token = Locked<(any CancellationToken)?>(nil)
            let sut = compose(upstream)
            let loadToken = sut.load { [probe = DeinitProbe { token.withLock { $0 }?.cancel() }] _ in
                probe.touch()
                delivered.withLock { $0 += 1 }
            }
            token.withLock { $0 = loadToken }

            guard assertReturns("\(name): cancel", keeping: upstream, sut, running: { loadToken.cancel() }) else {
                continue
            }
            upstream.complete(with: 1)
            XCTAssertEqual(delivered.withLock { $0 }, 0, "\(name) delivered after cancel")
        }
    }

    func test_complete_releasesStepTokenOutsideTheLock() {
        let token = Locked<(any CancellationToken)?>(nil)
        let finish = Locked<LoadCompletion<Int>?>(nil)
        let sut = AnyLoader<Int> { completion in
            finish.withLock { $0 = completion }
            return AnyCancellationToken { [probe = DeinitProbe { token.withLock { $0 }?.cancel() }] in probe.touch() }
        }
        let recorder = LoadRecorder<Int>()
        token.withLock { $0 = recorder.load(sut) }

        guard assertReturns("complete", keeping: recorder, running: { finish.withLock { $0 }?(.success(7)) }) else {
            return
        }
        XCTAssertEqual(recorder.values, [7])
    }

    func test_pendingLoad_releasesReplacedStepOutsideTheLock() {
        let pending = PendingLoad<Int> { _ in }
        pending.startStep { AnyCancellationToken { [probe = DeinitProbe { pending.cancel() }] in probe.touch() } }

        guard assertReturns("second step", running: { pending.startStep { AnyCancellationToken {} } }) else { return }
        XCTAssertTrue(pending.isFinished, "the deinit's cancel went through")
    }

    func test_asyncLoad_releasesTokenOutsideTheLock() async throws {
        let task = Locked<Task<Int, any Error>?>(nil)
        let sut = TokenOwningLoader(value: 5) { DeinitProbe { task.withLock { $0 }?.cancel() } }
        let started = Task { try await sut.load() }
        task.withLock { $0 = started }
        let loading = await eventually { sut.started.withLock { $0 != nil } }
        XCTAssertTrue(loading)
        sut.answer()

        let finished = expectation(
            description: "the awaited load returns (it deadlocks if its token is released under the lock)")
        Task {
            _ = await started.result
            finished.fulfill()
        }
        await fulfillment(of: [finished], timeout: .watchdog)
    }

    func test_loaderSpy_cancelReleasesCompletionOutsideItsLock() {
        let spy = LoaderSpy<Int>()
        let token = spy.load { [probe = DeinitProbe { _ = spy.pendingRequests }] _ in probe.touch() }

        guard assertReturns("cancel", keeping: spy, running: { token.cancel() }) else { return }
        XCTAssertEqual(spy.cancelledRequests, [0])
    }

    func test_anyCancellationToken_runsAndReleasesItsActionOutsideItsLock() {
        let token = Locked<AnyCancellationToken?>(nil)
        let sut = AnyCancellationToken { [probe = DeinitProbe { _ = token.withLock { $0 }?.isCancelled }] in
            probe.touch()
        }
        token.withLock { $0 = sut }

        guard assertReturns("cancel", running: { sut.cancel() }) else { return }
        XCTAssertTrue(sut.isCancelled)
    }

    func test_coalescedFamily_callerCancelReleasesItsCompletionOutsideTheLock() {
        let family = LoaderFamily { (_: Int) in LoaderSpy<Int>() }.coalesced()
        let other = Locked<(any CancellationToken)?>(nil)
        let token = family[1].load { [probe = DeinitProbe { other.withLock { $0 }?.cancel() }] _ in probe.touch() }
        other.withLock { $0 = family[1].load { _ in } }

        guard assertReturns("cancel", keeping: other, running: { token.cancel() }) else { return }
    }

    func test_memoryCache_evictionReleasesValuesOutsideItsLock() {
        let cache = MemoryCache<Int, Held>(countLimit: 1)
        cache.insert(Held(DeinitProbe { _ = cache.count }), for: 1)

        guard assertReturns("insert", keeping: cache, running: { cache.insert(Held(nil), for: 2) }) else { return }
        XCTAssertEqual(cache.count, 1)
    }

    func test_memoryCache_evictingSeveralValuesForOneInsert_releasesEachOutsideItsLock() {
        // A value without a probe costs 2: inserting it evicts both others.
        let cache = MemoryCache<Int, Held>(costLimit: 2, cost: { $0.probe == nil ? 2 : 1 })
        cache.insert(Held(DeinitProbe { _ = cache.count }), for: 1)
        cache.insert(Held(DeinitProbe { _ = cache.count }), for: 2)

        guard assertReturns("insert", keeping: cache, running: { cache.insert(Held(nil), for: 3) }) else { return }
        XCTAssertEqual(cache.count, 1)
    }

    func test_store_releasesTheKeysAndValuesOfKeysNoLongerInUse_outsideItsLock() {
        // No levels and no kept values: each key is dropped once its read is over, and its entry made again for the
        // next key. The first key's deinitializer and its value's call back into the store.
        let fetch = LoaderFamily { (key: ProbedKey) in
            AnyLoader<Held> { completion in
                completion(.success(Held(key.id == 1 ? DeinitProbe { _ = key.store?.count } : nil)))
                return AnyCancellationToken {}
            }
        }
        let store = Store<ProbedKey, Held>(levels: [], fetch: fetch, keptValues: 0)
        _ = store.read(ProbedKey(id: 1, store: store)).load { _ in }

        guard
            assertReturns(
                "a read of another key", keeping: store,
                running: { _ = store.read(ProbedKey(id: 2, store: nil)).load { _ in } })
        else { return }
    }

    func test_store_runsChangesAndReleasesThemOutsideItsLock() {
        let store = Store<Int, Int>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Int>() })
        store.write(1, for: 1)
        let commit = LoaderSpy<Void>()
        let probe = DeinitProbe { store.write(3, for: 2) }
        store.mutate(
            1,
            { [probe] value in
                probe.touch()
                store.write(2, for: 2)  // user code calling back into the store while the change is applied
                return value.map { $0 + 1 }
            }, commit: commit)
        withExtendedLifetime(probe) {}

        guard assertReturns("settle", keeping: store, commit, running: { commit.complete(with: ()) }) else { return }
        guard assertReturns("clear", keeping: store, running: { store.clear() }) else { return }
    }

    func test_store_evictingAKeptValueReleasesItOutsideItsLock() {
        let store = Store<Int, Held>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Held>() }, keptValues: 1)
        store.write(Held(DeinitProbe { _ = store.count }), for: 1)

        guard assertReturns("write", keeping: store, running: { store.write(Held(nil), for: 2) }) else { return }
        XCTAssertEqual(store.count, 1)
    }

    func test_store_droppingAnIdleKeyReleasesItsValueOutsideItsLock() {
        let store = Store<Int, Held>(
            levels: [.cache(ForgetfulCache(), name: "forgetful")], fetch: LoaderFamily { _ in LoaderSpy<Held>() },
            keptValues: 0)

        // The level keeps nothing, so the store's entry holds the last reference until the key falls out of use.
        guard
            assertReturns(
                "write", keeping: store, running: { store.write(Held(DeinitProbe { _ = store.count }), for: 1) })
        else { return }
        XCTAssertEqual(store.count, 0)
    }

    func test_store_keepingAKeysValueReleasesTheFailureItsStateObserversWereShownOutsideItsLock() {
        let network = LoaderSpy<Held>()
        let store = Store<Int, Held>(levels: [], fetch: LoaderFamily { _ in network }, keptValues: 4)
        store.write(Held(nil), for: 1)
        let states = store.states(for: 1).sink { _ in }
        _ = store.read(1, policy: .networkOnly).load { _ in }
        network.fail(with: ProbedError(probe: DeinitProbe { _ = store.count }))

        // The key falls out of use with its value kept, and is held as its record once another does: the failure
        // its state observers were shown is let go of then, and what held it is not the next key's.
        guard assertReturns("the last state observer leaves", keeping: store, running: { states.cancel() }) else {
            return
        }
        for key in 2...3 {
            guard assertReturns("a write", keeping: store, running: { store.write(Held(nil), for: key) }) else {
                return
            }
        }
        XCTAssertEqual(store.count, 3)
    }

    func test_store_keepingAKeysValueReleasesWhatItShowedWithASettledChangeOutsideItsLock() {
        let store = Store<Int, Held>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Held>() }, keptValues: 4)
        store.write(Held(nil), for: 1)
        let commit = LoaderSpy<Void>()
        let observer = store.changes(for: 1).sink { _ in }
        // Shown to the observer, the change's value is remembered by the store (what the next change starts from).
        store.mutate(1, { _ in Held(DeinitProbe { _ = store.count }) }, commit: commit)
        observer.cancel()
        commit.complete(with: ())

        // The key falls out of use, and is held as its record once another does: what it showed with the change is
        // let go of then, and what held it is not the next key's.
        for key in 2...3 {
            guard assertReturns("a write", keeping: store, running: { store.write(Held(nil), for: key) }) else {
                return
            }
        }
        XCTAssertEqual(store.count, 3)
    }

    func test_store_replacingTheResponseItSharesReleasesItOutsideItsLock() {
        let store = Store<Int, Held>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Held>() })
        store.write(Held(DeinitProbe { _ = store.count }), for: 1)
        _ = store.read(1).load { _ in }  // a hit: the store keeps the response to share it with the next
        store.write(Held(nil), for: 1)

        guard assertReturns("hit", keeping: store, running: { _ = store.read(1).load { _ in } }) else { return }
    }

    // MARK: Schedulers

    func test_cancelScheduledAction_releasesActionOutsideTheLock() {
        for (name, scheduler) in [("global", DispatchQueueScheduler.global() as any Scheduler), ("main", .main)] {
            let token = Locked<(any CancellationToken)?>(nil)
            let ran = Locked(false)
            let scheduled = scheduler.schedule(after: .seconds(60)) {
                [probe = DeinitProbe { token.withLock { $0 }?.cancel() }] in
                probe.touch()
                ran.withLock { $0 = true }
            }
            token.withLock { $0 = scheduled }

            guard assertReturns("\(name): cancel", keeping: token, running: { scheduled.cancel() }) else { continue }
            XCTAssertFalse(ran.withLock { $0 })
        }
    }

    func test_testScheduler_cancelReleasesActionOutsideItsLock() {
        let scheduler = TestScheduler()
        let scheduled = scheduler.schedule(after: .seconds(1)) {
            [probe = DeinitProbe { _ = scheduler.pendingCount }] in probe.touch()
        }

        guard assertReturns("cancel", keeping: scheduler, running: { scheduled.cancel() }) else { return }
        XCTAssertEqual(scheduler.pendingCount, 0)
    }

    // MARK: Streams

    func test_subject_cancelReleasesSubscriberOutsideTheLock_andDeliversNothingAfter() {
        let subject = StreamSubject<Int, Never>()
        let received = Locked<[Int]>([])
        let subscription = subject.stream.sink { [probe = DeinitProbe { subject.send(99) }] value in
            probe.touch()
            received.withLock { $0.append(value) }
        }
        subject.send(1)

        guard assertReturns("cancel", keeping: subject, running: { subscription.cancel() }) else { return }
        XCTAssertEqual(received.withLock { $0 }, [1], "nothing after cancel, the deinit's send included")
    }

    func test_subject_completionReleasesSubscribersOutsideTheLock() {
        let subject = StreamSubject<Int, Never>()
        let subscription = subject.stream.sink { [probe = DeinitProbe { subject.send(99) }] _ in probe.touch() }

        guard assertReturns("finish", keeping: subscription, running: { subject.send(completion: .finished) }) else {
            return
        }
        withExtendedLifetime(subscription) {}
    }

    func test_currentValueSubject_releasesReplacedValueOutsideTheLock() {
        let subject = CurrentValueStreamSubject<Held, Never>(Held(nil))
        subject.send(Held(DeinitProbe { subject.send(Held(nil)) }))

        assertReturns("send") { subject.send(Held(nil)) }
    }

    func test_future_cancelReleasesObserverOutsideTheLock_andDeliversNothingAfter() {
        let promise = Locked<(@Sendable (Result<Int, Never>) -> Void)?>(nil)
        let future = EventStream<Int, Never>.future { fulfil in promise.withLock { $0 = fulfil } }
        let received = Locked<[Int]>([])
        let subscription = future.sink { [probe = DeinitProbe { promise.withLock { $0 }?(.success(3)) }] value in
            probe.touch()
            received.withLock { $0.append(value) }
        }

        guard assertReturns("cancel", keeping: promise, running: { subscription.cancel() }) else { return }
        XCTAssertEqual(received.withLock { $0 }, [])
    }

    func test_debounce_releasesSupersededValueOutsideTheLock() {
        let source = Locked<StreamObserver<Held, Never>?>(nil)
        let scheduler = TestScheduler()
        let received = Locked(0)
        let subscription = EventStream<Held, Never> { observer in source.withLock { $0 = observer } }
            .debounce(for: .seconds(1), scheduler: scheduler)
            .sink { _ in received.withLock { $0 += 1 } }
        source.withLock { $0 }?.send(Held(DeinitProbe { source.withLock { $0 }?.send(Held(nil)) }))

        guard assertReturns("send", keeping: subscription, running: { source.withLock { $0 }?.send(Held(nil)) })
        else { return }
        scheduler.advance(by: .seconds(1))
        XCTAssertEqual(received.withLock { $0 }, 1, "one value for the burst")
    }

    func test_scan_runsItsClosureOutsideTheLock() {
        let source = Locked<StreamObserver<Int, Never>?>(nil)
        let values = Locked<[Int]>([])
        let subscription = EventStream<Int, Never> { observer in source.withLock { $0 = observer } }
            .scan(0) { total, value in
                if value == 1 { source.withLock { $0 }?.send(10) }  // calls back into the same operator
                return total + value
            }
            .sink { total in values.withLock { $0.append(total) } }

        guard assertReturns("send", keeping: subscription, running: { source.withLock { $0 }?.send(1) }) else { return }
        XCTAssertEqual(values.withLock { $0 }.count, 2)
    }

    func test_removeDuplicates_runsItsPredicateOutsideTheLock() {
        let source = Locked<StreamObserver<Int, Never>?>(nil)
        let values = Locked<[Int]>([])
        let subscription = EventStream<Int, Never> { observer in source.withLock { $0 = observer } }
            .removeDuplicates { previous, value in
                if value == 2 { source.withLock { $0 }?.send(3) }  // calls back into the same operator
                return previous == value
            }
            .sink { value in values.withLock { $0.append(value) } }
        source.withLock { $0 }?.send(1)

        guard assertReturns("send", keeping: subscription, running: { source.withLock { $0 }?.send(2) }) else { return }
        XCTAssertEqual(values.withLock { $0 }.first, 1)
    }

    func test_onTermination_releasesActionsOutsideTheLock() {
        let observer = Locked<StreamObserver<Int, Never>?>(nil)
        let stream = EventStream<Int, Never> { subscriber in observer.withLock { $0 = subscriber } }
        let subscription = stream.sink { _ in }
        observer.withLock { $0 }?.onTermination {
            [probe = DeinitProbe { observer.withLock { $0 }?.onTermination {} }] in
            probe.touch()
        }

        assertReturns("cancel", keeping: observer) { subscription.cancel() }
    }

    // MARK: Helpers

    private var composites: [(String, @Sendable (LoaderSpy<Int>) -> any Loader<Int>)] {
        [
            ("AnyLoader(callback)", { spy in AnyLoader { spy.load(completion: $0) } }),
            ("fallback", { spy in spy.fallback(to: LoaderSpy<Int>()) }),
            ("retry", { spy in spy.retry(.immediate(maxAttempts: 3), scheduler: .immediate) }),
            ("receive(on:)", { spy in spy.receive(on: .immediate) }),
            ("timeout", { spy in spy.timeout(after: .seconds(60), scheduler: TestScheduler()) }),
            ("caching(.failLoad)", { spy in spy.caching(to: CacheSpy<Int>(), policy: .failLoad) }),
            ("handleEvents(onCancel:)", { spy in spy.handleEvents(onCancel: {}) }),
            ("asStream().asLoader()", { spy in spy.asStream().asLoader() }),
        ]
    }

    /// Runs `body` on a thread of its own and fails if it has not returned within five seconds (a deadlock: the
    /// thread is left behind, and the test must not touch the deadlocked object again, so it returns `false`).
    @discardableResult
    private func assertReturns(
        _ description: String,
        keeping objects: any Sendable...,
        file: StaticString = #filePath,
        line: UInt = #line,
        running body: @escaping @Sendable () -> Void
    ) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            withExtendedLifetime(objects) {}  // a deadlocked thread keeps them, so nothing else runs into the lock
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + .watchdog) == .success else {
            XCTFail("\(description) deadlocked: a lock was held while user code called back", file: file, line: line)
            return false
        }
        return true
    }
}

/// Runs `onDeinit` when it is released: how a test makes dropping a closure run code. A test captures it in a
/// closure handed to the library, then lets go of its own reference with `release()`.
final class DeinitProbe: Sendable {
    private let onDeinit: @Sendable () -> Void

    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit { onDeinit() }

    func touch() {}
}

/// A store's key whose deinitializer reads the store it is a key of (when it has one).
private final class ProbedKey: Hashable, Sendable {
    let id: Int
    weak let store: Store<ProbedKey, Held>?

    init(id: Int, store: Store<ProbedKey, Held>?) {
        self.id = id
        self.store = store
    }

    deinit { _ = store?.count }

    static func == (lhs: ProbedKey, rhs: ProbedKey) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// A failure holding a probe, so that letting go of it runs code.
private struct ProbedError: Error {
    let probe: DeinitProbe
}

/// A value that may hold a probe, so that replacing or dropping the value releases it.
private struct Held: Sendable {
    let probe: DeinitProbe?

    init(_ probe: DeinitProbe?) {
        self.probe = probe
    }
}

/// A loader that returns a token of its own holding a probe, and answers when the test says so.
private struct TokenOwningLoader: Loader {
    let value: Int
    let makeProbe: @Sendable () -> DeinitProbe
    let started = Locked<LoadCompletion<Int>?>(nil)

    init(value: Int, makeProbe: @escaping @Sendable () -> DeinitProbe) {
        self.value = value
        self.makeProbe = makeProbe
    }

    func load(completion: @escaping LoadCompletion<Int>) -> any CancellationToken {
        let probe = makeProbe()
        started.withLock { $0 = completion }
        return AnyCancellationToken { probe.touch() }
    }

    /// Answers the load started, from another thread.
    func answer() {
        let completion = started.withLock { started in
            defer { started = nil }
            return started
        }
        Thread.detachNewThread { [value] in completion?(.success(value)) }
    }
}

/// A level that keeps nothing: every read misses, every save succeeds.
private struct ForgetfulCache<Value: Sendable>: KeyedCache {
    func value(for key: Int, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void) {
        completion(.failure(CacheMiss.absent))
    }

    func save(_ value: Value, for key: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeValue(for key: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
}
