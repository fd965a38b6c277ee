import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// A method named as an action acts; a builder has a noun name. The names a loader once had stay, deprecated, and
/// keep building loaders that do nothing until loaded.
final class ActionNamesTests: XCTestCase {
    func test_refresh_fetchesAtOnce_andFreshValueIsALoaderThatFetchesWhenLoaded() {
        let network = KeyedLoaderSpy<String, String>()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { network[$0] })
        let answered = LoadRecorder<StoreResponse<String>>()

        store.freshValue(of: "a").load { answered.record($0) }
        XCTAssertEqual(network.loadCount(for: "a"), 1, "on its own line, it fetches")
        network.complete("a", with: "fresh")
        XCTAssertEqual(answered.values.map(\.value), ["fresh"])

        let loader = store.freshValue(of: "a")
        XCTAssertEqual(network.loadCount(for: "a"), 1, "a loader fetches nothing until it is loaded")
        _ = loader.load { _ in }
        XCTAssertEqual(network.loadCount(for: "a"), 2)
    }

    func test_loadNextPage_loadsAtOnce_andNextPageIsALoader() {
        let source = PageSource(count: 4)
        let sut = PagedStore(levels: [.cache(MemoryCache<String, PagedList<Post, Int>>(), name: "memory")]) {
            (_: String, offset: Int?) in source.page(at: offset)
        }

        sut.nextPage(of: "feed").load { _ in }
        XCTAssertEqual(source.requests, [nil])
        let loader = sut.nextPage(of: "feed")
        XCTAssertEqual(source.requests, [nil])
        _ = loader.load { _ in }
        XCTAssertEqual(source.requests, [nil, 2])
    }

}
