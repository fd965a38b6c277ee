import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

final class StoreTests: XCTestCase {
    private let clock = TestClock()

    // MARK: Observation

    func test_stream_emitsTheCurrentValueThenEveryChange_whoeverMadeIt() {
        let (store, levels, network) = makeSUT()
        levels.memory.insert("cached", for: "a")
        let recorder = StreamRecorder(store.stream(for: "a"))

        store.write("live update", for: "a")
        network.load("a", into: store.freshValue(of: "a"))
        network.complete("a", with: "fresh")
        store.mutate("a", { $0.map { $0 + " (edited)" } }, commit: LoaderSpy<Void>())
        store.remove("a")

        XCTAssertEqual(recorder.values.map(\.value), ["cached", "live update", "fresh", "fresh (edited)", nil])
        XCTAssertEqual(recorder.values.map(\.origin), [.cache("memory"), .local, .network, .local, .local])
        XCTAssertNil(recorder.completion)
    }

    func test_writes_goThroughToEveryLevel() {
        let (store, levels, _) = makeSUT()

        store.write("v", for: "a")

        XCTAssertEqual(try? levels.memory.cachedValue(for: "a").get().value, "v")
        XCTAssertEqual(levels.disk.values["a"], "v")
    }

    func test_update_appliesToTheConfirmedValue_atomically_andWritesThrough() {
        let (store, levels, _) = makeSUT()
        store.write("a", for: "list")
        let recorder = StreamRecorder(store.stream(for: "list"))

        DispatchQueue.concurrentPerform(iterations: 100) { _ in store.update("list") { ($0 ?? "") + "." } }

        XCTAssertEqual(recorder.values.last?.value, "a" + String(repeating: ".", count: 100))
        XCTAssertEqual(levels.disk.values["list"], "a" + String(repeating: ".", count: 100))
        store.update("list") { _ in nil }
        XCTAssertEqual(recorder.values.last.map { $0.value }, .some(nil))
        XCTAssertNil(levels.disk.values["list"])
    }

    // MARK: Read policies

    func test_cacheFirst_servesTheFirstLevelHit_andNeverFetches() {
        let (store, levels, network) = makeSUT()
        levels.disk.values["a"] = "from disk"

        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheFirst))

        XCTAssertEqual(recorder.values.map(\.value), ["from disk"])
        XCTAssertEqual(recorder.values.map(\.origin), [.cache("disk")])
        XCTAssertEqual(try? levels.memory.cachedValue(for: "a").get().value, "from disk", "a hit fills faster levels")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    func test_cacheFirst_fetchesOnAMissEverywhere_andWritesEveryLevel() {
        let (store, levels, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheFirst))

        network.complete("a", with: "fresh")

        XCTAssertEqual(recorder.values.map(\.value), ["fresh"])
        XCTAssertEqual(recorder.values.map(\.origin), [.network])
        XCTAssertEqual(levels.disk.values["a"], "fresh")
    }

    func test_cacheThenNetwork_emitsTheCachedValueThenTheFreshOne() {
        let (store, levels, network) = makeSUT()
        levels.memory.insert("stale", for: "a")
        clock.advance(by: 30)
        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheThenNetwork))

        XCTAssertEqual(recorder.values.map(\.value), ["stale"])
        XCTAssertEqual(recorder.values.first?.age(at: clock.now), .seconds(30))
        network.complete("a", with: "fresh")

        XCTAssertEqual(recorder.values.map(\.value), ["stale", "fresh"])
        XCTAssertEqual(recorder.values.map(\.origin), [.cache("memory"), .network])
    }

    func test_networkFirst_fallsBackToTheCache_withTheFetchErrorAttached() {
        let (store, levels, network) = makeSUT()
        levels.disk.values["a"] = "cached"
        let recorder = StreamRecorder(store.stream(for: "a", policy: .networkFirst))

        XCTAssertEqual(recorder.values.count, 0, "the network goes first")
        network.fail("a", with: TestError(id: 5))

        XCTAssertEqual(recorder.values.map(\.value), ["cached"])
        XCTAssertEqual(recorder.values.first?.error as? TestError, TestError(id: 5))
        XCTAssertNil(recorder.completion)
    }

    func test_networkFirst_failsWhenNeitherHasAValue() {
        let (store, _, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "a", policy: .networkFirst))

        network.fail("a", with: TestError(id: 6))

        guard case .failure(let error) = recorder.completion else { return XCTFail("expected a failure") }
        XCTAssertEqual(error as? TestError, TestError(id: 6))
    }

    func test_cacheOnly_missFailsWithCacheMiss_andNeverFetches() {
        let (store, _, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheOnly))

        guard case .failure(let error) = recorder.completion else { return XCTFail("expected a miss") }
        XCTAssertEqual(error as? CacheMiss, .absent)
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    func test_networkOnly_skipsTheCacheRead_butStillWrites() {
        let (store, levels, network) = makeSUT()
        levels.disk.values["a"] = "cached"
        let recorder = StreamRecorder(store.stream(for: "a", policy: .networkOnly))

        XCTAssertEqual(levels.disk.reads, 0)
        network.complete("a", with: "fresh")

        XCTAssertEqual(recorder.values.map(\.value), ["fresh"])
        XCTAssertEqual(levels.disk.values["a"], "fresh")
    }

    func test_aDebouncedWriteWaiting_landsEvenWhenTheStoreIsReleased() {
        let scheduler = TestScheduler()
        let disk = SpyCache(now: { [clock] in clock.now })
        var store: Store<String, String>? = Store(
            levels: [.cache(disk, name: "disk", debouncingWritesFor: .milliseconds(500), scheduler: scheduler)],
            fetch: LoaderFamily { _ in LoaderSpy<String>() })
        weak let released = store
        store?.write("last", for: "a")
        store = nil

        scheduler.advance(by: .milliseconds(500))

        XCTAssertEqual(disk.values["a"], "last")
        XCTAssertNil(released, "and then the store goes away")
    }

    // MARK: Awaited reads

    func test_awaitedRead_ofAValueTheStoreHolds_returnsIt_withoutFetching() async throws {
        let (store, _, network) = makeSUT()
        let observer = store.changes(for: "a").sink { _ in }
        store.write("held", for: "a")

        let response = try await store.read("a").load()
        let throughTheProtocol = try await loadThroughTheProtocol(AnyLoader(store.read("a")))

        XCTAssertEqual(response.value, "held")
        XCTAssertEqual(response.origin, .local)
        XCTAssertEqual(throughTheProtocol.value, "held")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        observer.cancel()
    }

    func test_awaitedRead_inACancelledTask_throwsCancellationError_evenWhenTheStoreHoldsTheValue() async {
        let (store, _, network) = makeSUT()
        let observer = store.changes(for: "a").sink { _ in }
        store.write("held", for: "a")

        let result = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await store.read("a").load()
        }.result

        guard case .failure(let error) = result else { return XCTFail("expected CancellationError, got \(result)") }
        XCTAssertTrue(error is CancellationError, "\(error)")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        observer.cancel()
    }

    func test_awaitedRead_ofAValueTheStoreDoesNotHold_fetches_andCancellingTheTaskCancelsTheFetch() async {
        let (store, _, network) = makeSUT()
        let fetched = Task { try await store.read("a").load() }
        while network.loadCount(for: "a") == 0 { await Task.yield() }
        let cancelled = Task { try await store.read("b").load() }
        while network.loadCount(for: "b") == 0 { await Task.yield() }

        network.complete("a", with: "fresh")
        cancelled.cancel()
        let cancelledResult = await cancelled.result
        network.complete("b", with: "too late")

        let fetchedValue = try? await fetched.value
        XCTAssertEqual(fetchedValue?.value, "fresh")
        XCTAssertEqual(fetchedValue?.origin, .network)
        guard case .failure(let error) = cancelledResult else { return XCTFail("expected CancellationError") }
        XCTAssertTrue(error is CancellationError, "\(error)")
        XCTAssertEqual(network.cancelledCount(for: "b"), 1)
    }

    func test_readOfAValueTheStoreHolds_answersBeforeLoadReturns() {
        let (store, _, network) = makeSUT()
        let observer = store.changes(for: "a").sink { _ in }
        store.write("held", for: "a")
        let answers = Locked<[String?]>([])

        let token = store.read("a").load { result in answers.withLock { $0.append((try? result.get())?.value) } }
        let answeredBeforeReturning = answers.withLock { $0 }
        token.cancel()

        XCTAssertEqual(answeredBeforeReturning, ["held"])
        XCTAssertEqual(answers.withLock { $0 }, ["held"], "a cancel after the answer changes nothing")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        observer.cancel()
    }

    // MARK: Fetches and changes made while they run

    func test_aFetchThatStartedBeforeAChange_neverUndoesIt_theChangeIsAppliedToItsValue() {
        let (store, levels, network) = makeSUT()
        store.write("a", for: "list")
        let recorder = StreamRecorder(store.changes(for: "list"))
        let commit = LoaderSpy<Void>()

        network.load("list", into: store.freshValue(of: "list"))  // the server answers with what it had then
        store.update("list") { $0.map { $0 + "+live" } }
        store.mutate("list", { $0.map { $0 + "+edit" } }, commit: commit)
        commit.complete(with: ())
        network.complete("list", with: "server")

        XCTAssertEqual(recorder.values.last?.value, "server+live+edit")
        XCTAssertEqual(recorder.values.last?.origin, .local, "the fetched value with local changes on top")
        XCTAssertEqual(levels.disk.values["list"], "server+live+edit", "the levels hold what is shown")
        network.load("list", into: store.freshValue(of: "list"))
        network.complete("list", with: "later")
        XCTAssertEqual(recorder.values.last?.value, "later", "a fetch that started after the changes has them")
        XCTAssertEqual(recorder.values.last?.origin, .network)
    }

    func test_anUpdateWhileTheFirstFetchRuns_isAppliedToWhatItBrings_andNeverTouchesTheLevelsBefore() {
        let (store, levels, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "list", policy: .networkOnly))

        store.update("list") { $0.map { $0 + "+live" } }  // no value yet: nothing to change, nothing removed
        network.complete("list", with: "server")

        XCTAssertEqual(recorder.values.map(\.value), ["server+live"])
        XCTAssertEqual(levels.disk.values["list"], "server+live")
    }

    func test_keptValues_answerAgainWithoutTheLevels_goStaleWhenInvalidated_andAChangeStartsFromThem() {
        let (store, levels, network) = makeSUT(keptValues: 3)
        for key in ["a", "b", "c"] {
            _ = LoadRecorder<StoreResponse<String>>().load(store.read(key))
            network.complete(key, with: "v-\(key)")
        }
        levels.memory.removeAll { _ in }
        for key in ["a", "b", "c"] { levels.disk.values[key] = nil }

        let again = LoadRecorder<StoreResponse<String>>()
        _ = again.load(store.read("a"))
        XCTAssertEqual(again.values.map(\.value), ["v-a"], "a kept value answers as it is")
        XCTAssertEqual(network.loadCount(for: "a"), 1)

        store.invalidate("b")
        let stale = LoadRecorder<StoreResponse<String>>()
        _ = stale.load(store.read("b"))
        XCTAssertEqual(network.loadCount(for: "b"), 2, "an invalidated kept value is fetched again")
        network.complete("b", with: "v-b2", at: 1)
        XCTAssertEqual(stale.values.map(\.value), ["v-b2"])

        store.update("a") { $0.map { $0 + "+live" } }
        XCTAssertEqual(levels.disk.values["a"], "v-a+live", "a change of a kept key starts from its kept value")
        XCTAssertEqual(store.count, 3, "each key kept")
    }

    func test_anUpdateOfAKeyTheStoreDoesNotHold_appliesToWhatTheLevelsHold() {
        let (store, levels, _) = makeSUT()
        levels.disk.values["list"] = "on disk"

        store.update("list") { $0.map { $0 + "+live" } }

        XCTAssertEqual(levels.disk.values["list"], "on disk+live", "a live update never replaces a list it did not see")
        XCTAssertEqual(try? levels.memory.cachedValue(for: "list").get().value, "on disk+live")
    }

    func test_anUpdateOfAKeyWithNoValueAnywhere_thatMakesNone_writesNothing() {
        let (store, levels, _) = makeSUT()

        store.update("list") { $0.map { $0 + "+live" } }

        XCTAssertEqual(levels.disk.saves, 0)
        XCTAssertNil(levels.disk.values["list"])
        XCTAssertEqual(store.count, 0, "nothing is kept for a key that has nothing")
    }

    func test_aReadJoiningAFetchThatStartedBeforeAChange_stillAppliesTheChange() {
        let (store, _, network) = makeSUT()
        store.write("a", for: "list")
        let recorder = StreamRecorder(store.changes(for: "list"))

        let first = LoadRecorder<StoreResponse<String>>()
        first.load(store.read("list", policy: .networkOnly))
        store.update("list") { $0.map { $0 + "+live" } }
        let second = LoadRecorder<StoreResponse<String>>()
        second.load(store.read("list", policy: .networkOnly))  // shares the fetch that started before the change
        XCTAssertEqual(network.loadCount(for: "list"), 1)
        network.complete("list", with: "server")

        XCTAssertEqual(recorder.values.last?.value, "server+live")
        XCTAssertEqual(second.values.map(\.value), ["server+live"])
    }

    func test_aFailedOrCancelledFetch_forgetsTheChangesItKept() {
        let (store, _, network) = makeSUT()
        store.write("a", for: "list")
        let token = store.freshValue(of: "list").load { _ in }
        store.update("list") { $0.map { $0 + "+live" } }
        token.cancel()
        network.load("list", into: store.freshValue(of: "list"))
        network.complete("list", with: "server")

        let shown = LoadRecorder<StoreResponse<String>>()
        shown.load(store.read("list", policy: .cacheOnly))
        XCTAssertEqual(shown.values.map(\.value), ["server"], "the later fetch started after the change")
    }

    func test_read_networkFirst_deliversTheFetchedValue_notTheValueShownBefore() {
        let (store, _, network) = makeSUT()
        let observed = store.changes(for: "a").sink { _ in }  // observed: the store holds the key
        defer { observed.cancel() }
        store.write("shown", for: "a")
        let results = LoadRecorder<StoreResponse<String>>()

        results.load(store.read("a", policy: .networkFirst))
        XCTAssertEqual(results.all.count, 0, "the read waits for the network")
        network.complete("a", with: "fresh")
        results.load(store.read("a", policy: .networkOnly))
        network.fail("a", with: TestError(id: 3))

        XCTAssertEqual(results.values.map(\.value), ["fresh", "fresh"])
        XCTAssertEqual(results.values.map(\.origin), [.network, .network])
        XCTAssertNil(results.values.first?.error)
        XCTAssertEqual(results.values.last?.error as? TestError, TestError(id: 3), "the failure is attached")
    }

    func test_aFailedNetworkRead_ofAKeyNoOneObserves_answersWithTheLevelsValue_andTheErrorAttached() {
        let (store, _, network) = makeSUT(keptValues: 0)
        store.write("saved", for: "a")
        XCTAssertEqual(store.count, 0, "unobserved, the key lives in the levels")
        let results = LoadRecorder<StoreResponse<String>>()

        results.load(store.read("a", policy: .networkOnly))
        network.fail("a", with: TestError(id: 4))

        XCTAssertEqual(results.values.map(\.value), ["saved"])
        XCTAssertEqual(results.values.map(\.origin), [.cache("memory")])
        XCTAssertEqual(results.values.first?.error as? TestError, TestError(id: 4))
    }

    func test_cacheFirstWithAMaxAge_readsAValueTooOldForTheStore_anewFromTheLevels_evenWhileTheKeyIsObserved() {
        let (store, levels, network) = makeSUT()
        let observed = StreamRecorder(store.changes(for: "a"))
        store.write("old", for: "a")
        clock.advance(by: 600)
        levels.memory.insert("younger", for: "a")  // written there since (another process, say)
        let read = LoadRecorder<StoreResponse<String>>()

        read.load(store.read("a", policy: .cacheFirst(maxAge: .seconds(300))))

        XCTAssertEqual(read.values.map(\.value), ["younger"])
        XCTAssertEqual(read.values.map(\.origin), [.cache("memory")])
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        XCTAssertEqual(observed.values.last?.value, "younger")
    }

    func test_changes_emitsTheShownValueAndEveryChange_withoutReadingAnything() {
        let (store, levels, network) = makeSUT()
        levels.disk.values["a"] = "on disk"
        let recorder = StreamRecorder(store.changes(for: "a"))

        XCTAssertEqual(recorder.values.count, 0, "nothing is shown yet, and nothing is read")
        XCTAssertEqual(levels.disk.reads, 0)
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        store.write("written", for: "a")
        store.remove("a")
        let late = StreamRecorder(store.changes(for: "a"))

        XCTAssertEqual(recorder.values.map(\.value), ["written", nil])
        XCTAssertEqual(late.values.map(\.value), [nil], "a late observer gets what is shown now")
        XCTAssertNil(recorder.completion)
    }

    func test_read_deliversThePolicysFirstResponse() {
        let (store, levels, _) = makeSUT()
        levels.memory.insert("cached", for: "a")
        let recorder = LoadRecorder<StoreResponse<String>>()

        recorder.load(store.read("a"))

        XCTAssertEqual(recorder.values.map(\.value), ["cached"])
    }

    func test_read_cacheThenNetwork_answersWithTheCachedValue_andItsFetchGoesOnToUpdateTheStore() {
        let (store, _, network) = makeSUT()
        store.write("cached", for: "a")
        let changes = StreamRecorder(store.changes(for: "a"))
        let recorder = LoadRecorder<StoreResponse<String>>()

        recorder.load(store.read("a", policy: .cacheThenNetwork))
        network.complete("a", with: "fresh")

        XCTAssertEqual(recorder.values.map(\.value), ["cached"])
        XCTAssertEqual(network.loadCount(for: "a"), 1)
        XCTAssertEqual(changes.values.last?.value, "fresh", "the fetch the read started updated the store")
    }

    func test_aCancelledRead_neverCompletes_andCancelsItsFetchWhenNoOneElseWaits() {
        let (store, _, network) = makeSUT()
        let recorder = LoadRecorder<StoreResponse<String>>()

        recorder.load(store.read("a", policy: .networkOnly)).cancel()
        network.complete("a", with: "late")
        recorder.load(store.read("b")).cancel()  // the levels miss at once: the fetch started, then is cancelled

        XCTAssertEqual(recorder.count, 0, "a cancelled read never completes")
        XCTAssertEqual(network["b"].cancelledRequests, [0], "the last one out cancels the fetch")
    }

    func test_aReadOfAValueShown_answersAtOnce_andANetworkReadStillWaitsForTheNetwork() {
        let (store, levels, network) = makeSUT()
        store.write("shown", for: "a")
        let recorder = LoadRecorder<StoreResponse<String>>()

        recorder.load(store.read("a", policy: .cacheOnly))
        recorder.load(store.read("a", policy: .cacheFirst(maxAge: .seconds(60))))
        XCTAssertEqual(recorder.values.map(\.value), ["shown", "shown"])
        XCTAssertEqual(levels.disk.reads, 0)

        clock.advance(by: 61)  // now too old for this policy: read anew (the levels hold it as old), else fetched
        recorder.load(store.read("a", policy: .cacheFirst(maxAge: .seconds(60))))
        XCTAssertEqual(recorder.count, 2, "the old value does not answer")
        network.complete("a", with: "fresh")
        XCTAssertEqual(recorder.values.last?.value, "fresh")
    }

    func test_refresh_isNeverAbsorbedByAFetchAlreadyRunning() {
        let (store, _, network) = makeSUT()
        let subscription = StreamRecorder(store.stream(for: "a"))  // starts a fetch
        let refreshed = LoadRecorder<StoreResponse<String>>()

        refreshed.load(store.freshValue(of: "a"))
        XCTAssertEqual(network.loadCount(for: "a"), 2, "the refresh fetched anew")
        network.complete("a", with: "fresh", at: 1)

        XCTAssertEqual(refreshed.values.map(\.value), ["fresh"])
        subscription.cancel()
    }

    // MARK: Mutations

    func test_overlappingMutations_aRefusedOneIsUndoneAlone_anAcceptedOneJoinsTheConfirmedValue() {
        let (store, levels, _) = makeSUT()
        store.write("ab", for: "list")
        let recorder = StreamRecorder(store.stream(for: "list"))
        let first = LoaderSpy<Void>()
        let second = LoaderSpy<Void>()
        let outcomes = LoadRecorder<Void>()

        store.mutate(
            "list", { $0?.replacingOccurrences(of: "a", with: "") }, commit: first, completion: outcomes.record)
        store.mutate(
            "list", { $0?.replacingOccurrences(of: "b", with: "") }, commit: second, completion: outcomes.record)
        XCTAssertEqual(recorder.values.last?.value, "")
        XCTAssertEqual(recorder.values.last?.hasPendingChanges, true)

        first.fail(with: TestError(id: 1))
        XCTAssertEqual(recorder.values.last?.value, "a", "only the refused change is undone")
        second.complete(with: ())

        XCTAssertEqual(recorder.values.last?.value, "a")
        XCTAssertEqual(recorder.values.last?.hasPendingChanges, false)
        XCTAssertEqual(levels.disk.values["list"], "a", "the accepted change is written through")
        XCTAssertEqual(outcomes.count, 2)
        XCTAssertEqual(outcomes.errors.first as? TestError, TestError(id: 1))
    }

    func test_acceptedMutation_staysAfterALaterRefusal() {
        let (store, _, _) = makeSUT()
        store.write("ab", for: "list")
        let recorder = StreamRecorder(store.stream(for: "list"))
        let first = LoaderSpy<Void>()
        let second = LoaderSpy<Void>()

        store.mutate("list", { $0?.replacingOccurrences(of: "a", with: "") }, commit: first)
        store.mutate("list", { $0?.replacingOccurrences(of: "b", with: "") }, commit: second)
        first.complete(with: ())
        second.fail(with: TestError(id: 2))

        XCTAssertEqual(recorder.values.last?.value, "b")
    }

    // MARK: Clear and remove

    func test_clear_cancelsADebouncedWrite_andEmptiesEveryLevel() {
        let scheduler = TestScheduler()
        let (store, levels, _) = makeSUT(debounceDisk: scheduler)
        store.write("before logout", for: "a")
        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheOnly))
        XCTAssertNil(levels.disk.values["a"], "debounced")
        store.clear()
        scheduler.advance(by: .seconds(10))

        XCTAssertNil(levels.disk.values["a"], "the pending write was cancelled")
        XCTAssertEqual(levels.memory.count, 0)
        XCTAssertEqual(recorder.values.last.map { $0.value }, .some(nil))
    }

    func test_clear_dropsAFetchThatWasInFlight_andCancelsPendingMutations() {
        let (store, levels, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "a"))
        let commit = LoaderSpy<Void>()
        store.mutate("a", { _ in "optimistic" }, commit: commit)

        let outcome = LoadRecorder<Void>()
        store.mutate("a", { _ in "second" }, commit: LoaderSpy<Void>(), completion: outcome.record)

        store.clear()
        network.complete("a", with: "fetched before the clear")

        XCTAssertEqual(recorder.values.last.map { $0.value }, .some(nil))
        XCTAssertNil(levels.disk.values["a"])
        XCTAssertEqual(commit.cancelledRequests, [0])
        XCTAssertEqual(outcome.errors.first as? StoreError, .cleared, "a pending change's caller learns of the clear")
    }

    func test_remove_staysRemoved_whenAFetchStartedBeforeItCompletes() {
        let (store, levels, network) = makeSUT()
        store.write("v", for: "a")
        network.load("a", into: store.freshValue(of: "a"))

        store.remove("a")
        network.complete("a", with: "stale")

        XCTAssertNil(levels.disk.values["a"])
        XCTAssertEqual(levels.memory.cachedValue(for: "a").mapError { $0 }.map(\.value).failureIsMiss, true)
    }

    func test_aFetchDroppedByARemoval_doesNotFailTheObservation() {
        let (store, _, network) = makeSUT()
        let recorder = StreamRecorder(store.stream(for: "a"))

        store.remove("a")
        network.complete("a", with: "stale")
        store.write("later", for: "a")

        XCTAssertNil(recorder.completion)
        XCTAssertEqual(recorder.values.map(\.value), [nil, "later"])
    }

    func test_aLevelReadRacingAWrite_neverOverwritesTheNewerValue() {
        let (store, levels, _) = makeSUT()
        levels.disk.values["a"] = "old"
        levels.disk.holdReads = true
        let recorder = StreamRecorder(store.stream(for: "a", policy: .cacheOnly))

        store.write("new", for: "a")
        levels.disk.releaseReads()

        XCTAssertEqual(recorder.values.last?.value, "new")
        XCTAssertEqual(levels.disk.values["a"], "new")
        XCTAssertNil(recorder.completion, "a read that lost to a newer write is not a miss")
    }

    func test_debouncedLevel_writesTheLastValueOfABurstOnce() {
        let scheduler = TestScheduler()
        let (store, levels, _) = makeSUT(debounceDisk: scheduler)

        store.write("1", for: "a")
        store.write("2", for: "a")
        scheduler.advance(by: .milliseconds(499))
        XCTAssertNil(levels.disk.values["a"])
        store.write("3", for: "a")
        scheduler.advance(by: .milliseconds(500))

        XCTAssertEqual(levels.disk.values["a"], "3")
        XCTAssertEqual(levels.disk.saves, 1)
    }

    // MARK: Concurrency

    func test_concurrentWritesMutationsReadsAndClears_leaveObserversAgreeingWithTheStore() {
        let memory = MemoryCache<Int, Int>()
        let store = storeFetchingOnAnotherThread(memory) { .success($0 * 100) }
        let recorders = (0..<4).map { StreamRecorder(store.stream(for: $0, policy: .cacheThenNetwork)) }
        let commits = AnyLoader<Void> { completion in
            DispatchQueue.global().async { completion(Bool.random() ? .success(()) : .failure(TestError(id: 0))) }
            return AnyCancellationToken {}
        }
        let group = DispatchGroup()

        DispatchQueue.concurrentPerform(iterations: 2_000) { index in
            let key = index % 4
            switch index % 7 {
            case 0: store.write(index, for: key)
            case 1:
                group.enter()
                store.mutate(key, { ($0 ?? 0) + 1 }, commit: commits) { _ in group.leave() }
            case 2: store.remove(key)
            case 3:
                group.enter()
                store.freshValue(of: key).load { _ in group.leave() }
            case 4 where index % 500 == 4: store.clear()
            default:
                group.enter()
                store.read(key, policy: .cacheFirst).load { _ in group.leave() }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success)
        // The memory level ends up holding exactly what the store shows (level writes follow state changes in order).
        func levelsAgree() -> Bool {
            (0..<4).allSatisfy { key in
                recorders[key].values.last?.value == (try? memory.cachedValue(for: key).get().value)
            }
        }
        XCTAssertTrue(eventually(levelsAgree), "the memory level differs from what the store shows")
        for (key, recorder) in recorders.enumerated() {
            XCTAssertEqual(recorder.overlappingDeliveries, 0)
            let latest = LoadRecorder<StoreResponse<Int>>()
            latest.load(store.read(key, policy: .cacheOnly))
            if let shown = recorder.values.last?.value, let current = latest.values.first?.value {
                XCTAssertEqual(shown, current, "key \(key): the last emitted value is the store's")
            }
        }
    }

    func test_concurrentReadsOfEveryPolicy_cancelledAtRandom_completeAtMostOnce_andLeaveNoKeyInUse() {
        let store = storeFetchingOnAnotherThread(MemoryCache<Int, Int>(), keptValues: 0) { key in
            key % 3 == 0 ? .failure(TestError(id: key)) : .success(key)
        }
        let policies: [ReadPolicy] = [.cacheFirst, .cacheOnly, .cacheThenNetwork, .networkFirst, .networkOnly]
        let completions = Locked<[Int: Int]>([:])
        let kept = Locked<[Int]>([])
        let group = DispatchGroup()

        DispatchQueue.concurrentPerform(iterations: 3_000) { index in
            let key = index % 6
            if index % 250 == 0 { store.clear() }
            if index % 4 == 1 { store.remove(key) }
            let cancels = index % 3 == 0
            if !cancels { group.enter() }
            let token = store.read(key, policy: policies[index % policies.count]).load { _ in
                let calls = completions.withLock { calls -> Int in
                    calls[index, default: 0] += 1
                    return calls[index]!
                }
                if calls == 1, !cancels { group.leave() }
            }
            if cancels { token.cancel() } else { kept.withLock { $0.append(index) } }
        }

        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success, "every read not cancelled completes")
        let calls = completions.withLock { $0 }
        XCTAssertEqual(calls.values.filter { $0 > 1 }.count, 0, "no read completes twice")
        XCTAssertEqual(kept.withLock { $0 }.filter { calls[$0] != 1 }.count, 0)
        XCTAssertTrue(eventually { store.count == 0 }, "no key stays in use once every read is over")
    }

    // MARK: Helpers

    /// A store over `memory` whose fetch of a key answers `result(key)` from another thread.
    private func storeFetchingOnAnotherThread(
        _ memory: MemoryCache<Int, Int>, keptValues: Int? = nil,
        _ result: @escaping @Sendable (Int) -> Result<Int, any Error>
    ) -> Store<Int, Int> {
        Store(
            levels: [.cache(memory, name: "memory")],
            fetch: LoaderFamily { (key: Int) in
                AnyLoader<Int> { completion in
                    DispatchQueue.global().async { completion(result(key)) }
                    return AnyCancellationToken {}
                }
            }, keptValues: keptValues)
    }

    // MARK: Level write failures

    func test_aFetchedValueTheDiskFailsToSave_isReportedOnce_andStillAnswersTheReadAndShowsInMemory() throws {
        let (store, levels, network, failures) = makeStoreReportingWriteFailures()
        levels.disk.writeError = TestError(id: 1)

        let recorder = LoadRecorder<StoreResponse<String>>()
        let token = store.read("u1").load(completion: recorder.record)
        network.complete("u1", with: "fetched")

        XCTAssertEqual(recorder.values.map(\.value), ["fetched"], "a failed level write does not fail the read")
        XCTAssertEqual(failures.withLock { $0 }.compactMap { ($0 as? TestError)?.id }, [1])
        XCTAssertEqual(try levels.memory.cachedValue(for: "u1").get().value, "fetched")
        XCTAssertEqual(levels.disk.values, [:])
        withExtendedLifetime(token) {}
    }

    func test_everyFailedLevelWriteAndRemoval_isReported_andTheShownValueStays() {
        let (store, levels, _, failures) = makeStoreReportingWriteFailures()
        levels.disk.writeError = TestError(id: 2)
        let committed = Locked<Result<Void, any Error>?>(nil)
        let commit = LoaderSpy<Void>()

        store.write("written", for: "u1")
        store.mutate(
            "u1", { $0.map { $0 + "!" } }, commit: commit,
            completion: { result in committed.withLock { $0 = result } })
        commit.complete(with: ())
        store.remove("u2")

        XCTAssertEqual(failures.withLock { $0 }.count, 3, "the write, the confirmed change and the removal")
        XCTAssertNotNil(committed.withLock { $0 }, "the change's completion runs once its saves completed")
        XCTAssertNoThrow(try committed.withLock { $0 }?.get(), "a commit whose save failed still succeeded upstream")
        let shown = LoadRecorder<StoreResponse<String>>()
        _ = store.read("u1", policy: .cacheOnly).load(completion: shown.record)
        XCTAssertEqual(shown.values.map(\.value), ["written!"], "the store shows what it confirmed")
    }

    private func makeStoreReportingWriteFailures() -> (
        Store<String, String>, (memory: MemoryCache<String, String>, disk: SpyCache), KeyedLoaderSpy<String, String>,
        Locked<[any Error]>
    ) {
        let memory = MemoryCache<String, String>(now: { [clock] in clock.now })
        let disk = SpyCache(now: { [clock] in clock.now })
        let network = KeyedLoaderSpy<String, String>()
        let failures = Locked<[any Error]>([])
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { network[$0] },
            now: { [clock] in clock.now },
            onWriteFailure: { error in failures.withLock { $0.append(error) } })
        return (store, (memory, disk), network, failures)
    }

    /// Awaits `loader` where only its conformance to `Loader` is known.
    private func loadThroughTheProtocol<L: Loader>(_ loader: L) async throws -> L.Output {
        try await loader.load()
    }

    private func makeSUT(debounceDisk scheduler: TestScheduler? = nil, keptValues: Int? = nil) -> (
        Store<String, String>, (memory: MemoryCache<String, String>, disk: SpyCache), KeyedLoaderSpy<String, String>
    ) {
        let memory = MemoryCache<String, String>(now: { [clock] in clock.now })
        let disk = SpyCache(now: { [clock] in clock.now })
        let network = KeyedLoaderSpy<String, String>()
        let diskLevel: StoreLevel<String, String> =
            scheduler.map { .cache(disk, name: "disk", debouncingWritesFor: .milliseconds(500), scheduler: $0) }
            ?? .cache(disk, name: "disk")
        let store = Store(
            levels: [.cache(memory, name: "memory"), diskLevel],
            fetch: LoaderFamily { network[$0] }, keptValues: keptValues,
            now: { [clock] in clock.now })
        return (store, (memory, disk), network)
    }
}

extension KeyedLoaderSpy where Key == String, Output == String {
    /// Starts `loader` and keeps its token in `tokens` (so that the load is not dropped).
    fileprivate func load(_ key: String, into loader: AnyLoader<StoreResponse<String>>) {
        let token = loader.load { _ in }
        heldTokens.withLock { $0.append(token) }
    }
}

private let heldTokens = Locked<[any CancellationToken]>([])

extension Result {
    fileprivate var failureIsMiss: Bool {
        if case .failure(let error) = self { return error is CacheMiss }
        return false
    }
}
