import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Invalidation through the public API: what is marked stale, what is fetched at once, what waits for its next read.
final class InvalidationTests: XCTestCase {
    private let clock = TestClock()

    func test_invalidate_anObservedKey_isFetchedAnewAtOnce_keepingItsValueShownUntilTheFreshOne() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        let observed = StreamRecorder(store.stream(for: "a"))
        XCTAssertEqual(network.loadCount(for: "a"), 0)

        store.invalidate("a")

        XCTAssertEqual(network.loadCount(for: "a"), 1, "an observed key is fetched at once")
        XCTAssertEqual(observed.values.map(\.value), ["old"], "the value stays shown meanwhile")
        network.complete("a", with: "new")
        XCTAssertEqual(observed.values.map(\.value), ["old", "new"])
        XCTAssertEqual(levels.values["a"], "new")
    }

    /// An invalidation while an observed key's fetch runs owes the observers a refetch once that fetch ends (what it
    /// brings was asked before); a write made after the invalidation is fresh, and no refetch is owed any more.
    func test_aWriteAfterAnInvalidation_cancelsTheRefetchOwedForIt() {
        let (store, _, network) = makeSUT()
        let observed = StreamRecorder(store.changes(for: "a"))
        _ = store.read("a", policy: .networkOnly).load { _ in }
        store.invalidate("a")
        XCTAssertEqual(network.loadCount(for: "a"), 1, "one fetch at a time: the refetch is owed")

        store.write("written", for: "a")
        network.complete("a", with: "asked before the invalidation", at: 0)

        XCTAssertEqual(network.loadCount(for: "a"), 1, "the written value is fresh: nothing to refetch")
        XCTAssertEqual(observed.values.last?.value, "written")
    }

    /// An update asked after the invalidation that owed a refetch is fresh against it, even when another
    /// invalidation comes while the update runs and keeps the key stale: made while nobody observed the key, that one
    /// owes nothing, so the older fetch's answer begins no refetch.
    func test_anUpdateAskedAfterAnInvalidation_settlesTheRefetchOwedForIt_evenWhenAnotherComesWhileItRuns() {
        let network = KeyedLoaderSpy<String, [Int]>()
        let store = Store<String, [Int]>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { network[$0] })
        let observer = StreamRecorder(store.changes(for: "a"))
        _ = store.read("a", policy: .networkOnly).load { _ in }
        store.invalidate("a")
        XCTAssertEqual(network.loadCount(for: "a"), 1, "one fetch at a time: the refetch is owed")
        observer.cancel()

        ModelCheck.whileAChangeRuns(
            { hold in
                store.update("a") { value in
                    hold()
                    return (value ?? []) + [0]
                }
            },
            during: { store.invalidate("a") })
        let observedAgain = StreamRecorder(store.changes(for: "a"))
        network.complete("a", with: [7], at: 0)

        XCTAssertEqual(network.loadCount(for: "a"), 1, "the update settled the refetch; nobody saw the later one")
        XCTAssertEqual(observedAgain.values.last?.value, [7, 0], "the fetch's answer, with the update applied again")
    }

    func test_invalidate_anUnobservedKey_fetchesNothing_untilItsNextCacheFirstRead() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        XCTAssertEqual(value(of: store.read("a")), "old")

        store.invalidate("a")
        clock.advance(by: 1)
        XCTAssertEqual(network.loadCount(for: "a"), 0, "no one observes it: nothing is fetched yet")

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a"))
        XCTAssertEqual(network.loadCount(for: "a"), 1, "its next read fetches")
        network.complete("a", with: "new")
        XCTAssertEqual(read.values.map(\.value), ["new"])
        XCTAssertEqual(value(of: store.read("a")), "new", "fresh again: no further fetch")
        XCTAssertEqual(network.loadCount(for: "a"), 1)
    }

    func test_invalidate_aKeyOnlyTheLevelsHold_isJudgedStaleOnItsNextRead() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        XCTAssertEqual(store.count, 0, "the store does not hold the key: only its level does")

        store.invalidate("a")
        clock.advance(by: 1)
        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a"))

        XCTAssertEqual(network.loadCount(for: "a"), 1, "the level's value was saved before the invalidation")
        network.complete("a", with: "new")
        XCTAssertEqual(read.values.map(\.value), ["new"])
    }

    func test_aValueSavedAfterTheInvalidation_isFresh() {
        let (store, levels, network) = makeSUT()
        store.invalidate("a")
        clock.advance(by: 1)
        levels.values["a"] = "written later"

        XCTAssertEqual(value(of: store.read("a")), "written later")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    func test_anInvalidationOfOtherKeys_madeWhileAValueIsReadFromALevel_leavesThatValueFresh() {
        let memory = SpyCache(now: { [clock] in clock.now })
        let disk = SpyCache(now: { [clock] in clock.now })
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { network[$0] }, now: { [clock] in clock.now })
        disk.values["a"] = "saved"
        clock.advance(by: 1)
        let observed = StreamRecorder(store.changes(for: "a"))
        disk.holdReads = true
        let first = LoadRecorder<StoreResponse<String>>()
        _ = first.load(store.read("a"))

        store.invalidate("b")
        store.invalidate { $0.hasPrefix("b") }
        disk.releaseReads()
        XCTAssertEqual(first.values.map(\.value), ["saved"])

        XCTAssertEqual(value(of: store.read("a")), "saved", "no invalidation named the key")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        XCTAssertEqual(observed.values.map(\.value), ["saved"])
    }

    func test_aFailedRefetch_keepsTheStaleValueShown_withTheErrorAttached_andTheNextReadTriesAgain() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        let observed = StreamRecorder(store.stream(for: "a"))

        store.invalidate("a")
        network.fail("a", with: anyError)

        XCTAssertEqual(observed.values.map(\.value), ["old", "old"])
        XCTAssertNotNil(observed.values.last?.error, "the failure is attached to the value shown")
        XCTAssertNil(observed.completion, "the observation goes on")
        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a"))
        XCTAssertEqual(network.loadCount(for: "a"), 2, "still stale: a cache-first read fetches")
        network.complete("a", with: "new")
        XCTAssertEqual(read.values.map(\.value), ["new"])
    }

    func test_aCacheFirstReadOfAStaleKeyWhoseFetchFails_answersWithTheStaleValue_andTheError() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        store.invalidate("a")
        clock.advance(by: 1)

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a"))
        network.fail("a", with: anyError)

        XCTAssertEqual(read.values.map(\.value), ["old"])
        XCTAssertEqual(read.values.first?.error as? TestError, anyError)
    }

    func test_cacheOnly_stillAnswersWithAnInvalidatedValue() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        store.invalidate("a")
        clock.advance(by: 1)

        XCTAssertEqual(value(of: store.read("a", policy: .cacheOnly)), "old")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    func test_aFetchStartedBeforeTheInvalidation_doesNotMakeTheValueFresh_oneStartedAfterDoes() {
        let (store, _, network) = makeSUT()
        let first = LoadRecorder<StoreResponse<String>>()
        _ = first.load(store.read("a"))  // a fetch in flight, nobody observes the key

        store.invalidate("a")
        clock.advance(by: 1)
        network.complete("a", with: "from before", at: 0)
        XCTAssertEqual(first.values.map(\.value), ["from before"])

        let second = LoadRecorder<StoreResponse<String>>()
        _ = second.load(store.read("a"))
        XCTAssertEqual(network.loadCount(for: "a"), 2, "what a fetch older than the invalidation brought is stale")
        clock.advance(by: 1)
        network.complete("a", with: "fresh", at: 1)
        XCTAssertEqual(second.values.map(\.value), ["fresh"])
        XCTAssertEqual(value(of: store.read("a")), "fresh")
        XCTAssertEqual(network.loadCount(for: "a"), 2, "a fetch started after the invalidation is fresh")
    }

    func test_aWrite_makesTheKeyFresh() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        store.invalidate("a")
        clock.advance(by: 1)

        store.write("live update", for: "a")

        XCTAssertEqual(value(of: store.read("a")), "live update")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    func test_invalidateWhere_marksTheMatchingKeys_heldOrNot_andRefetchesOnlyTheObservedOnes() {
        let (store, levels, network) = makeSUT()
        for key in ["search:a", "search:b", "profile:me"] { levels.values[key] = "old" }
        let observed = StreamRecorder(store.stream(for: "search:a"))
        XCTAssertEqual(value(of: store.read("profile:me")), "old")

        store.invalidate { $0.hasPrefix("search:") }

        XCTAssertEqual(network.loadCount(for: "search:a"), 1, "observed and matching: fetched at once")
        XCTAssertEqual(network.loadCount(for: "search:b"), 0, "not observed: on its next read")
        clock.advance(by: 1)
        _ = store.read("search:b").load { _ in }
        XCTAssertEqual(network.loadCount(for: "search:b"), 1, "only its level held it, saved before")
        XCTAssertEqual(value(of: store.read("profile:me")), "old", "a key the predicate rejects stays fresh")
        XCTAssertEqual(network.loadCount(for: "profile:me"), 0)
        withExtendedLifetime(observed) {}
    }

    func test_invalidateWhere_runsThePredicateOutsideTheStoresLock() {
        let (store, levels, _) = makeSUT()
        levels.values["a"] = "old"
        XCTAssertEqual(value(of: store.read("a")), "old")
        let observed = StreamRecorder(store.stream(for: "a"))

        // The predicate reads the store (which takes its lock): under the lock, this would deadlock.
        store.invalidate { key in store.count >= 0 && key == "a" }
        clock.advance(by: 1)
        _ = store.read("b").load { _ in }

        XCTAssertEqual(observed.values.count, 1)
    }

    func test_invalidateAll_marksEveryKey_andRefetchesTheObservedOnes() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "old"
        levels.values["b"] = "old"
        let observed = StreamRecorder(store.stream(for: "a"))

        store.invalidateAll()
        clock.advance(by: 1)

        XCTAssertEqual(network.loadCount(for: "a"), 1)
        _ = store.read("b").load { _ in }
        XCTAssertEqual(network.loadCount(for: "b"), 1)
        withExtendedLifetime(observed) {}
    }

    func test_beyondTheRememberedInvalidations_everyValueSavedBeforeTheOldestCountsAsStale() {
        let (store, levels, network) = makeSUT()
        levels.values["untouched"] = "old"
        clock.advance(by: 1)
        for index in 0..<65 { store.invalidate("other \(index)") }  // one more than the store remembers
        clock.advance(by: 1)

        _ = store.read("untouched").load { _ in }

        XCTAssertEqual(network.loadCount(for: "untouched"), 1, "more is refetched, never less")
    }

    func test_clear_forgetsTheInvalidations() {
        let (store, levels, network) = makeSUT()
        store.invalidateAll()
        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
        levels.values["a"] = "saved at the same instant, after the clear"

        XCTAssertEqual(value(of: store.read("a")), "saved at the same instant, after the clear")
        XCTAssertEqual(network.loadCount(for: "a"), 0)
    }

    // MARK: Maximum ages

    func test_aStoresMaxAge_appliesToReadsThatDoNotSayOne() {
        let (store, levels, network) = makeSUT(maxAge: .seconds(60))
        levels.values["a"] = "saved now"
        XCTAssertEqual(value(of: store.read("a")), "saved now")

        clock.advance(by: 61)
        _ = store.read("a").load { _ in }

        XCTAssertEqual(network.loadCount(for: "a"), 1, "older than the store's maximum age")
        XCTAssertEqual(value(of: store.read("a", policy: .cacheFirst(maxAge: .seconds(3_600)))), "saved now")
    }

    func test_cacheThenNetworkWithAMaxAge_fetchesOnlyWhenTheCachedValueIsNotFresh() {
        let (store, levels, network) = makeSUT()
        levels.values["a"] = "cached"
        let policy = ReadPolicy.cacheThenNetwork(maxAge: .seconds(60))

        let first = StreamRecorder(store.stream(for: "a", policy: policy))
        XCTAssertEqual(first.values.map(\.value), ["cached"])
        XCTAssertEqual(network.loadCount(for: "a"), 0, "young enough: no fetch")

        clock.advance(by: 61)
        let second = StreamRecorder(store.stream(for: "a", policy: policy))
        XCTAssertEqual(second.values.map(\.value), ["cached"], "the cached value first, whatever its age")
        XCTAssertEqual(network.loadCount(for: "a"), 1, "too old: fetched")
        network.complete("a", with: "fresh")
        XCTAssertEqual(second.values.map(\.value), ["cached", "fresh"])

        store.invalidate("a")
        XCTAssertEqual(network.loadCount(for: "a"), 2, "observed and invalidated: fetched at once")
    }

    // MARK: Helpers

    private func makeSUT(maxAge: Duration? = nil) -> (Store<String, String>, SpyCache, KeyedLoaderSpy<String, String>) {
        let levels = SpyCache(now: { [clock] in clock.now })
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(
            levels: [.cache(levels, name: "disk")], fetch: LoaderFamily { network[$0] }, maxAge: maxAge,
            now: { [clock] in clock.now })
        return (store, levels, network)
    }

    private func value(of read: AnyLoader<StoreResponse<String>>) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(read)
        return recorder.values.first?.value
    }
}
