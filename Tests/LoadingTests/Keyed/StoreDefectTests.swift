import Dispatch
import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// What the store must hold on to, and what must not pile up: a value no level could save stays, a screen that starts
/// observing during a refresh sees the value the read served, invalidations fold into one fetch, and a clock set back
/// does not make a refreshed value stale again.
final class StoreDefectTests: XCTestCase {
    private let clock = TestClock()

    // MARK: A value no level could save

    func test_aValueNoLevelCouldSave_staysInTheStore_untilASaveSucceeds() {
        let level = SpyCache(now: { [clock] in clock.now })
        level.writeError = TestError(id: 1)
        let failures = Locked(0)
        let store = Store<String, String>(
            levels: [.cache(level, name: "disk")], fetch: LoaderFamily { _ in LoaderSpy<String>() }, keptValues: 0,
            now: { [clock] in clock.now }, onWriteFailure: { _ in failures.withLock { $0 += 1 } })

        store.write("edited", for: "k")

        XCTAssertEqual(failures.withLock { $0 }, 1, "the failure is reported")
        XCTAssertEqual(cacheOnly(store, "k"), "edited", "and the value is still there once the key is not in use")
        XCTAssertEqual(store.count, 1)

        level.writeError = nil
        store.write("saved", for: "k")
        XCTAssertEqual(level.values["k"], "saved")
        XCTAssertEqual(store.count, 0, "once a level saved it, the store lets the key go")
        XCTAssertEqual(cacheOnly(store, "k"), "saved")
    }

    func test_aValueNoLevelCouldSave_goesWithARemovalOrAClear() {
        let level = SpyCache(now: { [clock] in clock.now })
        level.writeError = TestError(id: 1)
        let store = Store<String, String>(
            levels: [.cache(level, name: "disk")], fetch: LoaderFamily { _ in LoaderSpy<String>() })
        store.write("a", for: "k1")
        store.write("b", for: "k2")
        level.writeError = nil

        store.remove("k1")
        XCTAssertNil(cacheOnly(store, "k1"))
        store.clear()
        XCTAssertNil(cacheOnly(store, "k2"))
        XCTAssertEqual(store.count, 0)
    }

    // MARK: Observing during a refresh

    func test_aScreenThatStartsObservingDuringARefresh_isShownTheValueTheReadServed() {
        let memory = MemoryCache<String, String>()
        memory.save("cached", for: "k") { _ in }
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] })

        let read = LoadRecorder<StoreResponse<String>>()
        _ = read.load(store.read("k", policy: .cacheThenNetwork))
        XCTAssertEqual(read.values.map(\.value), ["cached"])
        XCTAssertEqual(network.loadCount(for: "k"), 1, "the refresh runs")

        let screen = StreamRecorder(store.changes(for: "k"))
        XCTAssertEqual(screen.values.map(\.value), ["cached"], "replayed at once, not after the network")
        network.complete("k", with: "fresh")
        XCTAssertEqual(screen.values.map(\.value), ["cached", "fresh"])
    }

    // MARK: Invalidation storms

    func test_aHundredInvalidationsOfAnObservedKey_whileItsFetchRuns_oweOneFetch() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.changes(for: "k"))

        for _ in 0..<100 { store.invalidate("k") }
        XCTAssertEqual(network.loadCount(for: "k"), 1, "one fetch in flight")
        for _ in 0..<100 { store.invalidate("k") }
        store.revalidate()
        XCTAssertEqual(network.loadCount(for: "k"), 1)

        network.complete("k", with: "v1", at: 0)
        XCTAssertEqual(network.loadCount(for: "k"), 2, "one fetch owed for what came during the first")
        for _ in 0..<10 { store.invalidate("k") }
        network.complete("k", with: "v2", at: 1)
        XCTAssertEqual(network.loadCount(for: "k"), 3)
        network.complete("k", with: "v3", at: 2)
        XCTAssertEqual(network.loadCount(for: "k"), 3, "nothing more is owed")
        XCTAssertEqual(screen.values.last?.value, "v3")
    }

    func test_invalidationsWhileOffline_foldIntoOneRequest_whenTheNetworkComesBack() {
        let network = KeyedLoaderSpy<String, String>()
        let connectivity = ManualConnectivity(isOnline: false)
        let store = Store<String, String>(
            levels: [], fetch: LoaderFamily { network[$0] }, network: .waitsForNetwork(connectivity))
        store.write("v0", for: "k")
        let screen = StreamRecorder(store.changes(for: "k"))

        for _ in 0..<200 { store.invalidate("k") }
        XCTAssertEqual(network.loadCount(for: "k"), 0, "offline: nothing is requested")
        connectivity.setOnline(true)

        XCTAssertEqual(network.loadCount(for: "k"), 1, "one request for them all")
        network.complete("k", with: "v1")
        XCTAssertEqual(network.loadCount(for: "k"), 1, "it was sent after every invalidation: nothing is owed")
        XCTAssertEqual(screen.values.last?.value, "v1")
    }

    // MARK: A clock set back

    func test_aClockSetBackAfterAnInvalidation_doesNotMakeAKeyRefreshedSinceStaleAgain() {
        let level = SpyCache(now: { [clock] in clock.now })
        level.values["k"] = "old"
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(
            levels: [.cache(level, name: "disk")], fetch: LoaderFamily { network[$0] }, keptValues: 0,
            now: { [clock] in clock.now })

        store.invalidate("k")
        clock.advance(by: -3_600)  // the user sets the clock back an hour
        let first = LoadRecorder<StoreResponse<String>>()
        _ = first.load(store.read("k"))
        XCTAssertEqual(network.loadCount(for: "k"), 1, "stale: fetched")
        network.complete("k", with: "new")
        XCTAssertEqual(first.values.map(\.value), ["new"])
        XCTAssertEqual(store.count, 0, "only the level holds it now")

        for _ in 0..<5 {
            clock.advance(by: 1)
            XCTAssertEqual(cacheFirst(store, "k"), "new")
        }
        XCTAssertEqual(network.loadCount(for: "k"), 1, "fetched after the invalidation: fresh, whatever the clock says")
    }

    func test_aClockSetBackAfterInvalidateAll_doesNotMakeKeysRefreshedSinceStaleAgain() {
        let level = SpyCache(now: { [clock] in clock.now })
        level.values["a"] = "old"
        level.values["b"] = "old"
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(
            levels: [.cache(level, name: "disk")], fetch: LoaderFamily { network[$0] }, now: { [clock] in clock.now })

        store.invalidateAll()
        clock.advance(by: -3_600)
        for key in ["a", "b"] {
            _ = store.read(key).load { _ in }
            network.complete(key, with: "new \(key)")
        }
        clock.advance(by: 1)

        XCTAssertEqual(cacheFirst(store, "a"), "new a")
        XCTAssertEqual(cacheFirst(store, "b"), "new b")
        XCTAssertEqual(network.loadCount(for: "a") + network.loadCount(for: "b"), 2)
    }

    // MARK: Helpers

    private func cacheOnly(_ store: Store<String, String>, _ key: String) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(store.read(key, policy: .cacheOnly))
        return recorder.values.first?.value
    }

    private func cacheFirst(_ store: Store<String, String>, _ key: String) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(store.read(key))
        return recorder.values.first?.value
    }
}
