import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// The races a store must win, each through the public API: a logout during a slow read, a fetch overtaken by a
/// refresh, one key's slow work next to another's, the caller's task-local values, bounded memory.
final class StoreRaceTests: XCTestCase {
    // MARK: Removal and clear beat reads in flight

    func test_aSlowLevelReadStartedBeforeAClear_neverAnswersWithWhatItReadBefore() {
        let disk = SpyCache(now: Date.init)
        disk.values["a"] = "before logout"
        disk.holdReads = true
        let store = Store(levels: [.cache(disk, name: "disk")], fetch: LoaderFamily { (_: String) in LoaderSpy() })
        let read = LoadRecorder<StoreResponse<String>>()

        read.load(store.read("a"))
        store.clear()
        disk.releaseReads()  // the read found the value before the clear emptied the disk

        XCTAssertEqual(read.values.map(\.value), [nil], "no pre-logout data after the logout")
    }

    func test_aSlowLevelReadStartedBeforeARemoval_neverAnswersWithWhatItReadBefore() {
        let disk = SpyCache(now: Date.init)
        disk.values["a"] = "removed"
        disk.holdReads = true
        let store = Store(levels: [.cache(disk, name: "disk")], fetch: LoaderFamily { (_: String) in LoaderSpy() })
        let read = LoadRecorder<StoreResponse<String>>()

        read.load(store.read("a"))
        store.remove("a")
        disk.releaseReads()

        XCTAssertEqual(read.values.map(\.value), [nil])
    }

    // MARK: Last asked wins

    func test_aFetchStartedBeforeARefresh_neverReplacesWhatTheRefreshBrought() {
        let memory = MemoryCache<String, String>()
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] })
        let observed = StreamRecorder(store.changes(for: "a"))
        let read = LoadRecorder<StoreResponse<String>>()
        let refreshed = LoadRecorder<StoreResponse<String>>()

        read.load(store.read("a", policy: .networkOnly))
        refreshed.load(store.freshValue(of: "a"))
        XCTAssertEqual(network.loadCount(for: "a"), 2, "a refresh never joins the fetch running")
        network.complete("a", with: "new", at: 1)
        network.complete("a", with: "old", at: 0)

        XCTAssertEqual(observed.values.last?.value, "new")
        XCTAssertEqual(try? memory.cachedValue(for: "a").get().value, "new")
        XCTAssertEqual(refreshed.values.map(\.value), ["new"])
        XCTAssertEqual(read.values.map(\.value), ["new"], "the older fetch's caller gets what the store shows")
    }

    func test_aWriteRacingTheAnswerOfAFetchStartedBeforeIt_alwaysWins_whicheverLandsFirst() {
        for round in 0..<300 {
            let memory = MemoryCache<String, String>()
            let network = KeyedLoaderSpy<String, String>()
            let store = Store(levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] })
            let observed = StreamRecorder(store.changes(for: "a"))
            let read = LoadRecorder<StoreResponse<String>>()
            read.load(store.read("a"))
            let start = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            for side in 0..<2 {
                done.enter()
                Thread.detachNewThread {
                    start.wait()
                    if side == 0 { network.complete("a", with: "fetched") } else { store.write("written", for: "a") }
                    done.leave()
                }
            }
            start.signal()
            start.signal()
            XCTAssertEqual(done.wait(timeout: .now() + .watchdog), .success)

            // The write was asked after the fetch began: it is applied again to what the fetch brings.
            XCTAssertEqual(observed.values.last?.value, "written", "round \(round)")
            XCTAssertEqual(try? memory.cachedValue(for: "a").get().value, "written", "round \(round)")
            XCTAssertEqual(read.values.count, 1, "round \(round): the read is answered once")
            if read.values.first?.value != "fetched" {
                XCTAssertEqual(read.values.first?.value, "written", "round \(round): with what the store shows")
            }
        }
    }

    // MARK: Keys never wait for each other

    func test_aSlowCompletionOfOneKey_neverHoldsBackAnotherKeysRead() {
        let memory = MemoryCache<String, String>()
        memory.insert("A", for: "a")
        memory.insert("B", for: "b")
        let store = Store(levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { (_: String) in LoaderSpy() })
        let answered = DispatchSemaphore(value: 0)
        let otherKey = Locked<(value: String?, onTheReadersThread: Bool)>((nil, false))
        let waited = Locked<DispatchTimeoutResult?>(nil)

        let token = store.read("a").load { _ in
            // Key a's completion waits for a read of key b made on another thread.
            Thread.detachNewThread {
                // The thread's identity, not its name: Foundation on Linux may not report a name set this early.
                let reader = pthread_self()
                _ = store.read("b").load { result in
                    let onReader = pthread_equal(pthread_self(), reader) != 0
                    otherKey.withLock { $0 = ((try? result.get())?.value, onReader) }
                    answered.signal()
                }
            }
            waited.withLock { $0 = answered.wait(timeout: .now() + .watchdog) }
        }

        XCTAssertEqual(waited.withLock { $0 }, .success, "key b's read waited for key a's completion")
        XCTAssertEqual(otherKey.withLock { $0.value }, "B")
        XCTAssertTrue(otherKey.withLock { $0.onTheReadersThread }, "key b's completion ran on key a's thread")
        token.cancel()
    }

    func test_aReadsFetch_runsInItsCallersTask_withItsTaskLocalValues() async throws {
        let levels = GatedCache(gated: "a")
        let seen = Locked<[String: String]>([:])
        let store = Store(
            levels: [.cache(levels, name: "slow")],
            fetch: LoaderFamily { (key: String) in
                AnyLoader<String> { completion in
                    seen.withLock { $0[key] = RequestContext.id }
                    completion(.success(key.uppercased()))
                    return AnyCancellationToken {}
                }
            })

        // Caller A's level read blocks its thread; caller B reads another key meanwhile.
        let first = Task { try await RequestContext.$id.withValue("A") { try await store.read("a").load() } }
        let entered = await eventually { levels.isGateEntered }
        XCTAssertTrue(entered)
        let second = Task { try await RequestContext.$id.withValue("B") { try await store.read("b").load() } }
        let startedAtOnce = await eventually { seen.withLock { $0["b"] != nil } }
        levels.openGate()
        _ = try await (first.value, second.value)

        XCTAssertTrue(startedAtOnce, "B's fetch waited for A's level read")
        XCTAssertEqual(seen.withLock { $0 }, ["a": "A", "b": "B"], "each fetch runs with its own caller's values")
    }

    // MARK: Bounded memory

    func test_manyKeysReadOnce_leaveTheObservedKey_andTheLastValuesWithinTheDefaultBound() {
        let count = scaled(20_000, floor: 2_000)  // far more than the store keeps (256) and its level (1,000)
        let memory = MemoryCache<Int, Int>(countLimit: 1_000)
        let store = Store(
            levels: [.cache(memory, name: "memory")],
            fetch: LoaderFamily { (key: Int) in
                AnyLoader<Int> { completion in
                    completion(.success(key))
                    return AnyCancellationToken {}
                }
            })
        let observed = StreamRecorder(store.changes(for: -1))
        store.write(-1, for: -1)
        let answers = Locked(0)

        for key in 0..<count {
            _ = store.read(key).load { _ in answers.withLock { $0 += 1 } }
        }

        XCTAssertEqual(answers.withLock { $0 }, count)
        XCTAssertEqual(store.count, 1 + 256, "the observed key and the last 256 values; the others live in the levels")
        XCTAssertEqual(observed.values.map(\.value), [-1])
        let reread = LoadRecorder<StoreResponse<Int>>()
        reread.load(store.read(count - 1, policy: .cacheOnly))
        reread.load(store.read(count - 1_000, policy: .cacheOnly))
        XCTAssertEqual(
            reread.values.map(\.origin), [.network, .cache("memory")],
            "the store answers with a value it kept, and reads the level for one it did not")
    }

    func test_removeAndClear_dropTheKeysNoOneObserves() {
        let store = Store(levels: [.cache(MemoryCache<String, Int>(), name: "memory")], fetch: .never)
        let observed = StreamRecorder(store.changes(for: "watched"))
        store.write(1, for: "watched")
        store.mutate("pending", { _ in 2 }, commit: LoaderSpy<Void>())
        XCTAssertEqual(store.count, 2, "an observed key and a key with a pending change")

        store.remove("watched")
        store.clear()

        XCTAssertEqual(store.count, 1, "the observed key stays (it shows nothing), the cleared change is gone")
        XCTAssertEqual(observed.values.last.map(\.value), .some(nil))
    }

    // MARK: Reads cancelled while a level is read

    func test_aReadCancelledWhileItsLevelIsRead_neverCompletes_confirmsNothing_andFetchesNothing() {
        let disk = SpyCache(now: Date.init)
        disk.values["hit"] = "on disk"
        disk.holdReads = true
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(levels: [.cache(disk, name: "disk")], fetch: LoaderFamily { network[$0] })
        let recorder = LoadRecorder<StoreResponse<String>>()

        recorder.load(store.read("hit")).cancel()
        recorder.load(store.read("miss")).cancel()
        XCTAssertEqual(store.count, 2, "each key is in use while its level is read")
        disk.releaseReads()

        XCTAssertEqual(recorder.count, 0, "a cancelled read never completes")
        XCTAssertEqual(network.loadCount(for: "miss"), 0, "a read cancelled before its levels missed fetches nothing")
        XCTAssertEqual(store.count, 0, "the hit was not confirmed, and no key stays in use")
    }

    func test_aStreamCancelledWhileItsLevelIsRead_isNotToldOfTheMiss() {
        let disk = SpyCache(now: Date.init)
        disk.holdReads = true
        let store = Store(levels: [.cache(disk, name: "disk")], fetch: LoaderFamily { (_: String) in LoaderSpy() })
        let stream = StreamRecorder(store.stream(for: "a", policy: .cacheOnly))

        stream.cancel()
        disk.releaseReads()

        XCTAssertNil(stream.completion, "the cache-only miss came after the cancel")
        XCTAssertEqual(store.count, 0)
    }

    // MARK: Coalesced callers cancelled during delivery

    func test_aCoalescedCallerCancelledByAnEarlierCallersCompletion_isNotCalled() {
        let network = KeyedLoaderSpy<String, Int>()
        let family = LoaderFamily { network[$0] }.coalesced()
        let calls = Locked<[String]>([])
        let second = Locked<(any CancellationToken)?>(nil)

        let first = family["a"].load { _ in
            calls.withLock { $0.append("first") }
            second.withLock { $0 }?.cancel()
        }
        second.withLock { $0 = family["a"].load { _ in calls.withLock { $0.append("second") } } }
        network.complete("a", with: 1)

        XCTAssertEqual(calls.withLock { $0 }, ["first"], "cancelled on the delivering thread: never called")
        first.cancel()
    }

    // MARK: Changes take effect in the order they were asked

    /// An update of `"a"` (holding `[]`) whose transform waits until `body` has run on this thread, on a thread of its
    /// own; returns once it has finished.
    private func whileAnUpdateRuns(of store: Store<String, [Int]>, _ body: () -> Void) {
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            store.update("a") { value in
                entered.signal()
                proceed.wait()
                return (value ?? []) + [0]
            }
            done.signal()
        }
        entered.wait()
        body()
        proceed.signal()
        done.wait()
    }

    func test_anOptimisticChangeMadeWhileAnUpdateRuns_isShownAfterIt() {
        let store = Store<String, [Int]>(levels: [.cache(MemoryCache(), name: "memory")], fetch: .never)
        store.write([], for: "a")
        let observed = StreamRecorder(store.changes(for: "a"))

        whileAnUpdateRuns(of: store) {
            store.mutate("a", { ($0 ?? []) + [1] }, commit: LoaderSpy<Void>())
        }

        XCTAssertEqual(observed.values.map(\.value), [[], [0], [0, 1]], "never the change over the value before")
    }

    /// A read asked while an update runs waits for it and sees what it made; the key, in use by that read all the
    /// while, keeps showing it while the read's fetch runs, even in a store that keeps no value of a key let go of.
    func test_aNetworkReadAskedWhileAnUpdateRuns_keepsTheUpdatedValueShownWhileItFetches() {
        let network = KeyedLoaderSpy<String, [Int]>()
        let store = Store<String, [Int]>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { network[$0] }, keptValues: 0)
        let read = LoadRecorder<StoreResponse<[Int]>>()

        whileAnUpdateRuns(of: store) {
            read.load(store.read("a", policy: .networkOnly))
            XCTAssertEqual(network.loadCount(for: "a"), 0, "the read waits for the update asked before it")
        }

        XCTAssertEqual(network.loadCount(for: "a"), 1)
        XCTAssertEqual(store.state(for: "a").value, [0], "the update's value, shown while the read fetches")
        XCTAssertTrue(store.state(for: "a").isLoading)
        network.complete("a", with: [7], at: 0)
        XCTAssertEqual(read.values.map(\.value), [[7]])
    }

    func test_aRefusedChangeMadeWhileAnUpdateRuns_completesOnceItIsUndone() {
        let store = Store<String, [Int]>(levels: [.cache(MemoryCache(), name: "memory")], fetch: .never)
        store.write([], for: "a")
        let completed = Locked(false)
        let refused = AnyLoader<Void> { completion in
            completion(.failure(anyError))
            return AnyCancellationToken {}
        }

        whileAnUpdateRuns(of: store) {
            store.mutate("a", { ($0 ?? []) + [1] }, commit: refused) { _ in completed.withLock { $0 = true } }
            XCTAssertFalse(completed.withLock { $0 }, "the change is not undone before the update asked before it")
        }

        XCTAssertTrue(completed.withLock { $0 })
        let after = LoadRecorder<StoreResponse<[Int]>>()
        after.load(store.read("a", policy: .cacheOnly))
        XCTAssertEqual(after.values.map(\.value), [[0]])
        XCTAssertEqual(after.values.map(\.hasPendingChanges), [false])
    }

    func test_aChangeAcceptedBeforeAClear_completesAsAccepted_onceItsSaveLands() {
        let disk = SpyCache(now: Date.init)
        disk.holdSaves = true
        let store = Store<String, String>(levels: [.cache(disk, name: "disk")], fetch: .never)
        let outcome = Locked<String?>(nil)
        // The server accepts at once; a logout comes right after (another thread's), before the save has landed.
        let accepted = AnyLoader<Void> { completion in
            completion(.success(()))
            store.clear()
            return AnyCancellationToken {}
        }

        store.mutate(
            "a", { _ in "changed" }, commit: accepted,
            completion: { result in
                outcome.withLock { $0 = (try? result.get()).map { "accepted" } ?? "failed" }
            })
        disk.releaseSaves()

        XCTAssertEqual(outcome.withLock { $0 }, "accepted")
    }

    func test_aChangeClearedBeforeItsCommitStarts_isNeverSent() {
        let store = Store<String, String>(levels: [.cache(MemoryCache(), name: "memory")], fetch: .never)
        let commits = LoaderSpy<Void>()
        let outcome = Locked<String?>(nil)
        // An observer that logs out when it is shown the change: after the change is added, before its commit starts.
        let observer = StreamRecorder(store.changes(for: "a")) { event in
            if case .value(let response) = event, response.hasPendingChanges { store.clear() }
        }

        store.mutate(
            "a", { _ in "changed" }, commit: commits,
            completion: { result in
                outcome.withLock { $0 = (try? result.get()).map { "accepted" } ?? "failed" }
            })

        XCTAssertEqual(commits.loadCount, 0, "a logout came before the commit started")
        XCTAssertEqual(outcome.withLock { $0 }, "failed")
        withExtendedLifetime(observer) {}
    }
}

enum RequestContext {
    @TaskLocal static var id = "none"
}

extension LoaderFamily where Output: Sendable {
    /// A family whose loads never complete.
    fileprivate static var never: LoaderFamily { LoaderFamily { _ in LoaderSpy<Output>() } }
}

/// A keyed cache that holds nothing; reading the gated key blocks the reading thread until the gate opens.
private final class GatedCache: KeyedCache {
    private let gated: String
    private let gate = DispatchSemaphore(value: 0)
    private let entered = Locked(false)

    init(gated: String) {
        self.gated = gated
    }

    var isGateEntered: Bool { entered.withLock { $0 } }

    func openGate() {
        gate.signal()
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        if key == gated {
            entered.withLock { $0 = true }
            gate.wait()
        }
        completion(.failure(CacheMiss.absent))
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
}
