import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// What loads and store reads do while the network cannot be reached: wait, or answer from the cache; never a
/// request that cannot succeed, and never a failure in a loop.
final class NetworkModeTests: XCTestCase {
    // MARK: Loader composites

    func test_waitingForNetwork_offline_startsNothing_untilTheNetworkComesBack() {
        let connectivity = ManualConnectivity(isOnline: false)
        let spy = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        let token = recorder.load(spy.waitingForNetwork(connectivity))
        XCTAssertEqual(spy.loadCount, 0)
        connectivity.setOnline(true)
        connectivity.setOnline(false)
        connectivity.setOnline(true)

        XCTAssertEqual(spy.loadCount, 1, "started once, when the network came back")
        spy.complete(with: 7)
        XCTAssertEqual(recorder.values, [7])
        withExtendedLifetime(token) {}
    }

    func test_waitingForNetwork_online_startsAtOnce() {
        let spy = LoaderSpy<Int>()
        _ = spy.waitingForNetwork(ManualConnectivity(isOnline: true)).load { _ in }
        XCTAssertEqual(spy.loadCount, 1)
    }

    func test_waitingForNetwork_cancelledWhileWaiting_neverStarts_norCompletes() {
        let connectivity = ManualConnectivity(isOnline: false)
        let spy = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        recorder.load(spy.waitingForNetwork(connectivity)).cancel()
        connectivity.setOnline(true)

        XCTAssertEqual(spy.loadCount, 0)
        XCTAssertEqual(recorder.count, 0)
    }

    func test_waitingForNetwork_cancelledOnceStarted_cancelsTheLoad() {
        let connectivity = ManualConnectivity(isOnline: false)
        let spy = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        let token = recorder.load(spy.waitingForNetwork(connectivity))
        connectivity.setOnline(true)
        token.cancel()
        spy.complete(with: 1)

        XCTAssertEqual(spy.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }

    func test_failingWhileOffline_failsAtOnceWithoutALoad() {
        let connectivity = ManualConnectivity(isOnline: false)
        let spy = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        _ = recorder.load(spy.failingWhileOffline(connectivity))

        XCTAssertEqual(spy.loadCount, 0)
        XCTAssertEqual(recorder.errors.first as? OfflineError, OfflineError())
        connectivity.setOnline(true)
        _ = recorder.load(spy.failingWhileOffline(connectivity))
        XCTAssertEqual(spy.loadCount, 1)
    }

    // MARK: Store

    func test_waitsForNetwork_aReadThatNeedsTheNetwork_waitsForIt() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, _, network) = makeSUT(.waitsForNetwork(connectivity))
        let read = LoadRecorder<StoreResponse<String>>()

        let token = read.load(store.read("a"))
        XCTAssertEqual(network.loadCount(for: "a"), 0, "offline: nothing is requested")
        XCTAssertEqual(read.count, 0, "and the read does not fail: it waits")

        connectivity.setOnline(true)
        network.complete("a", with: "fresh")
        XCTAssertEqual(read.values.map(\.value), ["fresh"])
        withExtendedLifetime(token) {}
    }

    func test_waitsForNetwork_aCachedValueAnswersOffline_andCacheThenNetworkRefreshesOnceOnline() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, memory, network) = makeSUT(.waitsForNetwork(connectivity))
        memory.insert("cached", for: "a")

        XCTAssertEqual(value(of: store.read("a")), "cached")
        let observed = StreamRecorder(store.stream(for: "a", policy: .cacheThenNetwork))
        XCTAssertEqual(observed.values.map(\.value), ["cached"])
        XCTAssertEqual(network.loadCount(for: "a"), 0)

        connectivity.setOnline(true)
        network.complete("a", with: "fresh")
        XCTAssertEqual(observed.values.map(\.value), ["cached", "fresh"])
        XCTAssertNil(observed.completion)
    }

    func test_answersFromCache_offline_aNetworkReadAnswersWithTheCachedValueAndOfflineError_withoutARequest() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, memory, network) = makeSUT(.answersFromCache(connectivity))
        memory.insert("cached", for: "a")

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a", policy: .networkFirst))

        XCTAssertEqual(network.loadCount(for: "a"), 0)
        XCTAssertEqual(read.values.map(\.value), ["cached"])
        XCTAssertEqual(read.values.first?.error as? OfflineError, OfflineError())
    }

    func test_answersFromCache_offline_aReadWithNothingCached_failsWithOfflineError_once() {
        let connectivity = ManualConnectivity(isOnline: false)
        let (store, _, network) = makeSUT(.answersFromCache(connectivity))

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("a"))

        XCTAssertEqual(network.loadCount(for: "a"), 0)
        XCTAssertEqual(read.errors.count, 1)
        XCTAssertEqual(read.errors.first as? OfflineError, OfflineError())
    }

    // MARK: Helpers

    private func makeSUT(
        _ mode: NetworkMode
    ) -> (Store<String, String>, MemoryCache<String, String>, KeyedLoaderSpy<String, String>) {
        let memory = MemoryCache<String, String>()
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] }, network: mode)
        return (store, memory, network)
    }

    private func value(of read: AnyLoader<StoreResponse<String>>) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(read)
        return recorder.values.first?.value
    }
}
