import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// A value the store holds itself (kept for a key out of use, or shown) is as old as when it was learned, and is
/// judged by the maximum age of the levels it is saved in: the store serves none its levels have expired.
final class StoreLevelExpiryTests: XCTestCase {
    private let clock = TestClock()

    func test_aKeptValue_isFetchedAgain_onceTheMemoryLevelExpiredIt() {
        let level = MemoryCache<String, String>(expiry: .maxAge(.seconds(60)), now: { [clock] in clock.now })
        assertKeptValueFollowsTheExpiry(of: .cache(level, name: "memory"))
    }

    func test_aKeptValue_isFetchedAgain_onceTheDiskLevelExpiredIt() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("expiry-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let level = DiskCache<String, String>(
            directory: directory, expiry: .maxAge(.seconds(60)), now: { [clock] in clock.now })
        assertKeptValueFollowsTheExpiry(of: .cache(level, name: "disk"))
    }

    func test_aValueReadFromALevel_isAsOldAsTheLevelSays_notAsWhenTheStoreReadIt() {
        let level = MemoryCache<String, String>(expiry: .maxAge(.seconds(60)), now: { [clock] in clock.now })
        level.insert("saved earlier", for: "k")
        clock.advance(by: 50)
        let network = FetchSpy()
        let store = makeStore(levels: [.cache(level, name: "memory")], network)
        XCTAssertEqual(read("k", from: store), "saved earlier", "10 s left")

        clock.advance(by: 20)  // 70 s old: the level has expired it
        let again = readWhenFetched("k", from: store, network, answering: "fetched")

        XCTAssertEqual(network.count, 1, "fetched: the value is as old as the level says")
        XCTAssertEqual(again, "fetched")
    }

    func test_theSlowestLevelsExpiry_holdsForAValueSavedInEveryLevel() {
        let memory = MemoryCache<String, String>(expiry: .maxAge(.seconds(60)), now: { [clock] in clock.now })
        let longer = MemoryCache<String, String>(expiry: .maxAge(.seconds(600)), now: { [clock] in clock.now })
        let network = FetchSpy()
        let store = makeStore(levels: [.cache(memory, name: "memory"), .cache(longer, name: "longer")], network)
        XCTAssertEqual(readWhenFetched("k", from: store, network, answering: "v1"), "v1")

        clock.advance(by: 120)  // the memory level expired it; the longer one still holds it
        XCTAssertEqual(read("k", from: store), "v1")
        XCTAssertEqual(network.count, 1, "no fetch: a level still serves it")

        clock.advance(by: 600)
        XCTAssertEqual(readWhenFetched("k", from: store, network, answering: "v2"), "v2")
        XCTAssertEqual(network.count, 2)
    }

    func test_anObservedValue_pastItsLevelsExpiry_isFetchedAgainByACacheFirstRead() {
        let level = MemoryCache<String, String>(expiry: .maxAge(.seconds(60)), now: { [clock] in clock.now })
        let network = FetchSpy()
        let store = makeStore(levels: [.cache(level, name: "memory")], network)
        let shown = StreamRecorder(store.changes(for: "k"))
        XCTAssertEqual(readWhenFetched("k", from: store, network, answering: "v1"), "v1")

        clock.advance(by: 3_600)
        XCTAssertEqual(readWhenFetched("k", from: store, network, answering: "v2"), "v2")

        XCTAssertEqual(network.count, 2)
        XCTAssertEqual(shown.values.last?.value, "v2")
    }

    // MARK: - Helpers

    private func assertKeptValueFollowsTheExpiry(
        of level: StoreLevel<String, String>, file: StaticString = #filePath, line: UInt = #line
    ) {
        let network = FetchSpy()
        let store = makeStore(levels: [level], network)
        XCTAssertEqual(readWhenFetched("k", from: store, network, answering: "v1"), "v1", file: file, line: line)

        clock.advance(by: 30)
        XCTAssertEqual(read("k", from: store), "v1", "30 s old: served as it is", file: file, line: line)
        XCTAssertEqual(network.count, 1, file: file, line: line)

        clock.advance(by: 3_600)
        let again = readWhenFetched("k", from: store, network, answering: "v2")
        XCTAssertEqual(
            network.count, 2, "an hour old: the level expired it, so the store fetches", file: file, line: line)
        XCTAssertEqual(again, "v2", file: file, line: line)
    }

    private func makeStore(levels: [StoreLevel<String, String>], _ network: FetchSpy) -> Store<String, String> {
        Store(levels: levels, fetch: LoaderFamily { _ in network.loader() }, now: { [clock] in clock.now })
    }

    /// Reads `key`, answering the fetch the read starts (if any) with `value`; the read's answer.
    private func readWhenFetched(
        _ key: String, from store: Store<String, String>, _ network: FetchSpy, answering value: String
    ) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(store.read(key))
        XCTAssertTrue(eventually { recorder.count == 1 || network.isFetching })
        if network.isFetching { network.answer(value) }
        XCTAssertTrue(eventually { recorder.count == 1 })
        return recorder.values.first?.value
    }

    /// Reads `key`, the answer expected at once (no fetch answered).
    private func read(_ key: String, from store: Store<String, String>) -> String? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(store.read(key))
        XCTAssertTrue(eventually { recorder.count == 1 })
        return recorder.values.first?.value
    }
}

/// The network: counts the fetches, each answered by the test.
private final class FetchSpy: Sendable {
    private let spy = LoaderSpy<String>()

    var count: Int { spy.loadCount }
    var isFetching: Bool { !spy.pendingRequests.isEmpty }

    func loader() -> LoaderSpy<String> { spy }

    /// Answers the fetch waiting.
    func answer(_ value: String) {
        if let waiting = spy.pendingRequests.last { spy.complete(with: value, at: waiting) }
    }
}
