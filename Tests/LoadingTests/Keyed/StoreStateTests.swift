import Dispatch
import Foundation
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// `Store.states(for:)`: a key's value with whether the store fetches it, and the latest failure, for whoever asked;
/// one state per change, with no state in between that never was.
final class StoreStateTests: XCTestCase {
    func test_aKeyNotReadYet_isIdle_thenLoading_thenLoaded() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        let screen = StreamRecorder(store.states(for: "k"))
        XCTAssertEqual(screen.values.map(describe), ["idle"])

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("k"))
        XCTAssertEqual(screen.values.map(describe), ["idle", "loading(nil)"])
        network.complete("k", with: "v1")

        XCTAssertEqual(screen.values.map(describe), ["idle", "loading(nil)", "loaded(v1)"])
        XCTAssertEqual(screen.values.last?.origin, .network)
        XCTAssertEqual(read.values.map(\.value), ["v1"])
    }

    func test_readingTheLevels_isNotLoading_aCachedValueShowsWithoutASpinnerFirst() {
        let memory = SpyCache(now: { Date() })
        let disk = SpyCache(now: { Date() })
        disk.values["k"] = "cached"
        disk.holdReads = true
        let store = Store<String, String>(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { _ in LoaderSpy<String>() })
        let screen = StreamRecorder(store.states(for: "k"))

        _ = LoadRecorder<StoreResponse<String>>().load(store.read("k"))
        XCTAssertEqual(screen.values.map(describe), ["idle"], "the memory level missed; the disk is being read")
        disk.releaseReads()

        XCTAssertEqual(screen.values.map(describe), ["idle", "loaded(cached)"])
        XCTAssertEqual(screen.values.last?.origin, .cache("disk"))
        XCTAssertNotNil(screen.values.last?.savedAt)
    }

    func test_aReadThatMissesEveryLevel_showsLoadingFromItsFetch_withNoStateBetweenTheLevels() {
        let network = KeyedLoaderSpy<String, String>()
        let levels: [StoreLevel<String, String>] = [
            .cache(SpyCache(now: { Date() }), name: "memory"), .cache(SpyCache(now: { Date() }), name: "disk"),
        ]
        let store = Store<String, String>(levels: levels, fetch: LoaderFamily { network[$0] })
        let screen = StreamRecorder(store.states(for: "k"))

        _ = LoadRecorder<StoreResponse<String>>().load(store.read("k"))
        network.complete("k", with: "fetched")

        XCTAssertEqual(screen.values.map(describe), ["idle", "loading(nil)", "loaded(fetched)"])
    }

    func test_aFailedFetchWithNothingShown_showsTheFailure_andTheNextReadLoadsAgain() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        let screen = StreamRecorder(store.states(for: "k"))

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("k"))
        network.fail("k", with: TestError(id: 7))
        XCTAssertEqual(screen.values.map(describe), ["idle", "loading(nil)", "failed(nil)"])
        XCTAssertEqual(screen.values.last?.error as? TestError, TestError(id: 7))
        XCTAssertEqual(read.errors.count, 1, "the read fails too: nothing to show")

        _ = LoadRecorder<StoreResponse<String>>().load(store.read("k"))
        network.complete("k", with: "v1", at: 1)
        XCTAssertEqual(
            screen.values.map(describe), ["idle", "loading(nil)", "failed(nil)", "loading(nil)", "loaded(v1)"])
        XCTAssertNil(screen.values.last?.error, "a value clears the failure")
    }

    func test_aCacheOnlyReadThatFindsNothing_leavesTheStateAsItWas() {
        let store = Store<String, String>(
            levels: [.cache(SpyCache(now: { Date() }), name: "disk")], fetch: LoaderFamily { _ in LoaderSpy<String>() })
        let screen = StreamRecorder(store.states(for: "k"))

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("k", policy: .cacheOnly))

        XCTAssertEqual(read.errors.first as? CacheMiss, .absent, "its caller is told")
        XCTAssertEqual(screen.values.map(describe), ["idle"])
    }

    func test_aNetworkFirstReadWhoseFetchFails_endsFailed_afterReadingTheLevelsForAFallback() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(
            levels: [.cache(SpyCache(now: { Date() }), name: "disk")], fetch: LoaderFamily { network[$0] })
        let screen = StreamRecorder(store.states(for: "k"))

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("k", policy: .networkFirst))
        network.fail("k", with: TestError(id: 3))

        XCTAssertEqual(read.errors.count, 1)
        XCTAssertEqual(screen.values.first.map(describe), "idle")
        XCTAssertEqual(screen.values.last.map(describe), "failed(nil)")
        XCTAssertFalse(screen.values.dropFirst().contains { describe($0) == "idle" }, "no state that never was")
        XCTAssertEqual(screen.values.last?.error as? TestError, TestError(id: 3))
    }

    func test_aFailedRefresh_keepsTheValueShown_withTheFailure_andNoLoadedStateInBetween() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.states(for: "k"))

        store.freshValue(of: "k").load { _ in }
        network.fail("k", with: TestError(id: 1))

        XCTAssertEqual(screen.values.map(describe), ["loaded(v0)", "loading(v0)", "failed(v0)"])
    }

    func test_aRefetchSomeoneElseStarted_showsLoading_andItsAnswer() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.states(for: "k"))
        let changes = StreamRecorder(store.changes(for: "k"))

        store.invalidate("k")  // an observed key is fetched anew at once
        XCTAssertEqual(network.loadCount(for: "k"), 1)
        network.complete("k", with: "v1")

        XCTAssertEqual(screen.values.map(describe), ["loaded(v0)", "loading(v0)", "loaded(v1)"])
        XCTAssertEqual(changes.values.map(\.value), ["v0", "v1"], "observers of changes see values only")
    }

    func test_aClearDuringAFetch_showsNothingLoading_andTheDroppedAnswerChangesNothing() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.states(for: "k"))
        store.freshValue(of: "k").load { _ in }

        store.clear()
        XCTAssertEqual(screen.values.map(describe), ["loaded(v0)", "loading(v0)", "idle"])
        network.complete("k", with: "from before the logout")

        XCTAssertEqual(screen.values.map(describe), ["loaded(v0)", "loading(v0)", "idle"])
    }

    func test_aReadWhoseCallerLeaves_stopsLoadingOnceItsFetchIsCancelled() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        let screen = StreamRecorder(store.states(for: "k"))

        let token = store.read("k").load { _ in XCTFail("a cancelled read never completes") }
        token.cancel()

        XCTAssertEqual(screen.values.map(describe), ["idle", "loading(nil)", "idle"])
    }

    func test_anOptimisticChange_isShownPending_thenConfirmed() {
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<String>() })
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.states(for: "k"))
        let commit = LoaderSpy<Void>()

        store.mutate("k", { $0.map { $0 + "!" } }, commit: commit)
        XCTAssertEqual(screen.values.last?.value, "v0!")
        XCTAssertEqual(screen.values.last?.hasPendingChanges, true)
        XCTAssertEqual(screen.values.last?.origin, .local)
        commit.complete(with: ())

        XCTAssertEqual(screen.values.last?.value, "v0!")
        XCTAssertEqual(screen.values.last?.hasPendingChanges, false)
        XCTAssertFalse(screen.values.contains { $0.isLoading }, "a change is not a load")
    }

    func test_theLastStateObserverLeaving_letsTheKeyGo() {
        let level = SpyCache(now: { Date() })
        let store = Store<String, String>(
            levels: [.cache(level, name: "disk")], fetch: LoaderFamily { _ in LoaderSpy<String>() }, keptValues: 0)
        let first = store.states(for: "k").sink { _ in }
        let second = store.states(for: "k").sink { _ in }
        store.write("v0", for: "k")
        XCTAssertEqual(store.count, 1)

        first.cancel()
        XCTAssertEqual(store.count, 1, "still observed")
        second.cancel()
        XCTAssertEqual(store.count, 0)
        XCTAssertEqual(level.values["k"], "v0")
    }

    func test_aStateObserverArrivingDuringALoad_isShownItLoading() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("v0", for: "k")
        store.freshValue(of: "k").load { _ in }

        let screen = StreamRecorder(store.states(for: "k"))
        XCTAssertEqual(screen.values.map(describe), ["loading(v0)"])
        network.complete("k", with: "v1")
        XCTAssertEqual(screen.values.map(describe), ["loading(v0)", "loaded(v1)"])
    }

    func test_readsRefreshesWritesAndInvalidationsOnEightThreads_endWithTheStoresValue_notLoading() {
        let answers = Locked(0)
        let fetch = LoaderFamily { (_: String) in
            AnyLoader<String> { completion in
                let answer = answers.withLock { count in
                    count += 1
                    return count
                }
                DispatchQueue.global().async { completion(.success("fetched \(answer)")) }
                return AnyCancellationToken {}
            }
        }
        let level = MemoryCache<String, String>()
        let store = Store<String, String>(levels: [.cache(level, name: "memory")], fetch: fetch)
        let screen = StreamRecorder(store.states(for: "k"))
        let changes = StreamRecorder(store.changes(for: "k"))
        let done = DispatchGroup()

        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for step in 0..<100 {
                switch (thread + step) % 4 {
                case 0:
                    done.enter()
                    store.read("k").load { _ in done.leave() }
                case 1:
                    done.enter()
                    store.freshValue(of: "k").load { _ in done.leave() }
                case 2: store.write("written \(thread).\(step)", for: "k")
                default: store.invalidate("k")
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + .watchdog), .success)
        // Answers may still be on their way to the screen.
        XCTAssertTrue(
            eventually { screen.values.last?.isLoading == false }, "every fetch ended: \(screen.values.last!)")

        XCTAssertEqual(screen.values.last?.value, changes.values.last?.value, "the state shows what the store shows")
        XCTAssertNotNil(screen.values.last?.value)
    }

    func test_theStateNow_saysWhetherTheKeyIsFetched_observedOrNot() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        XCTAssertEqual(describe(store.state(for: "k")), "idle")
        store.write("v0", for: "k")

        store.freshValue(of: "k").load { _ in }
        XCTAssertEqual(describe(store.state(for: "k")), "loading(v0)")
        network.complete("k", with: "v1")

        XCTAssertEqual(describe(store.state(for: "k")), "loaded(v1)")
        XCTAssertEqual(store.state(for: "k").origin, .network)
    }

    private func describe(_ state: StoreState<String>) -> String {
        switch state.loadingState {
        case .idle: "idle"
        case .loading(let previous): "loading(\(previous ?? "nil"))"
        case .loaded(let value): "loaded(\(value))"
        case .failed(_, let previous): "failed(\(previous ?? "nil"))"
        }
    }
}
