import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// Revalidation triggers: the foreground, the network coming back and a period fetch the observed keys that are not
/// fresh, and only those; nothing while offline.
final class RevalidationTests: XCTestCase {
    private let clock = TestClock()

    func test_foreground_refetchesTheObservedKeysOlderThanTheMaxAge_only() {
        let (store, memory, network) = makeSUT(maxAge: .seconds(60))
        memory.insert("old", for: "old")
        let lifecycle = ManualAppLifecycle()
        let revalidation = store.revalidate(on: .foreground(lifecycle))
        let old = StreamRecorder(store.stream(for: "old"))
        clock.advance(by: 61)
        memory.insert("young", for: "young")
        let young = StreamRecorder(store.stream(for: "young"))
        memory.insert("unobserved", for: "unobserved")

        lifecycle.enterForeground()

        XCTAssertEqual(network.loadCount(for: "old"), 1)
        XCTAssertEqual(network.loadCount(for: "young"), 0, "fresh")
        XCTAssertEqual(network.loadCount(for: "unobserved"), 0, "no one shows it")
        network.complete("old", with: "new")
        XCTAssertEqual(old.values.map(\.value), ["old", "new"])

        lifecycle.enterForeground()
        XCTAssertEqual(network.loadCount(for: "old"), 1, "fresh again")
        withExtendedLifetime((revalidation, young)) {}
    }

    func test_foreground_withoutAMaxAge_refetchesEveryObservedKey_andTheInvalidatedOnes() {
        let (store, memory, network) = makeSUT(maxAge: nil)
        memory.insert("cached", for: "a")
        let lifecycle = ManualAppLifecycle()
        let revalidation = store.revalidate(on: .foreground(lifecycle))
        let observed = StreamRecorder(store.stream(for: "a"))

        lifecycle.enterForeground()
        XCTAssertEqual(network.loadCount(for: "a"), 1)
        lifecycle.enterForeground()
        XCTAssertEqual(network.loadCount(for: "a"), 1, "its fetch is in flight: left to it")
        withExtendedLifetime((revalidation, observed)) {}
    }

    func test_reconnect_firesWhenTheNetworkComesBack_notForTheFirstState() {
        let connectivity = ManualConnectivity(isOnline: true)
        let (store, memory, network) = makeSUT(maxAge: nil, network: .waitsForNetwork(connectivity))
        memory.insert("cached", for: "a")
        let observed = StreamRecorder(store.stream(for: "a"))
        let revalidation = store.revalidate(on: .reconnect(connectivity))
        XCTAssertEqual(network.loadCount(for: "a"), 0, "subscribing is not a reconnection")

        connectivity.setOnline(false)
        connectivity.setOnline(true)

        XCTAssertEqual(network.loadCount(for: "a"), 1)
        withExtendedLifetime((revalidation, observed)) {}
    }

    func test_anObservedKeyWhoseFirstLoadFailedOffline_isLoadedWhenTheNetworkComesBack() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, _, network) = makeSUT(maxAge: nil, network: .answersFromCache(connectivity))
        let revalidation = store.revalidate(on: .reconnect(connectivity))
        let observed = StreamRecorder(store.changes(for: "a"))
        _ = store.read("a").load { _ in }
        XCTAssertEqual(network.loadCount(for: "a"), 0, "offline: failed without a request")

        connectivity.setOnline(true)
        network.complete("a", with: "loaded")

        XCTAssertEqual(observed.values.map(\.value), ["loaded"])
        withExtendedLifetime(revalidation) {}
    }

    func test_interval_revalidatesEveryPeriod_andStopsWithItsSubscription() {
        let (store, memory, network) = makeSUT(maxAge: .seconds(30))
        let scheduler = TestScheduler()
        memory.insert("cached", for: "a")
        let observed = StreamRecorder(store.stream(for: "a"))
        var revalidation: StreamSubscription? = store.revalidate(on: .interval(.seconds(60), scheduler: scheduler))

        clock.advance(by: 31)
        scheduler.advance(by: .seconds(59))
        XCTAssertEqual(network.loadCount(for: "a"), 0)
        scheduler.advance(by: .seconds(1))
        XCTAssertEqual(network.loadCount(for: "a"), 1)
        network.complete("a", with: "fresh")

        clock.advance(by: 31)
        scheduler.advance(by: .seconds(60))
        XCTAssertEqual(network.loadCount(for: "a"), 2)
        network.complete("a", with: "fresher")

        revalidation = nil
        clock.advance(by: 31)
        scheduler.advance(by: .seconds(600))
        XCTAssertEqual(network.loadCount(for: "a"), 2, "stopped with its subscription")
        XCTAssertEqual(scheduler.pendingCount, 0)
        withExtendedLifetime((revalidation, observed)) {}
    }

    func test_revalidate_offline_doesNothing_soNothingFailsInALoop() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, memory, network) = makeSUT(maxAge: nil, network: .answersFromCache(connectivity))
        let scheduler = TestScheduler()
        memory.insert("cached", for: "a")
        let observed = StreamRecorder(store.stream(for: "a"))
        let revalidation = store.revalidate(on: .interval(.seconds(1), scheduler: scheduler))

        scheduler.advance(by: .seconds(100))

        XCTAssertEqual(network.loadCount(for: "a"), 0)
        XCTAssertEqual(observed.values.map(\.value), ["cached"], "no failure attached a hundred times")
        withExtendedLifetime((revalidation, observed)) {}
    }

    func test_theRevalidationSubscription_doesNotKeepTheStoreAlive() {
        let lifecycle = ManualAppLifecycle()
        var store: Store<String, String>? = makeSUT(maxAge: nil).0
        weak let released = store
        let revalidation = store!.revalidate(on: .foreground(lifecycle))

        store = nil
        lifecycle.enterForeground()

        XCTAssertNil(released)
        withExtendedLifetime(revalidation) {}
    }

    // MARK: Helpers

    private func makeSUT(
        maxAge: Duration?, network mode: NetworkMode = .always
    ) -> (Store<String, String>, MemoryCache<String, String>, KeyedLoaderSpy<String, String>) {
        let memory = MemoryCache<String, String>(now: { [clock] in clock.now })
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] }, maxAge: maxAge,
            network: mode, now: { [clock] in clock.now })
        return (store, memory, network)
    }
}
