import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// The contract of paged lists: pages accumulate, a cap drops the oldest, a refresh revalidates the loaded pages in
/// order and stops at the first unchanged one, pages are saved in the levels, live changes reach the right page.
final class PagedStoreTests: XCTestCase {
    private typealias List = PagedList<Post, Int>

    func test_loadNextPage_loadsTheFirstPage_thenEachNext_andStopsAtTheEnd() {
        let source = PageSource(count: 5)
        let sut = makeSUT(source)

        XCTAssertEqual(ids(next(sut)), [0, 1])
        XCTAssertEqual(ids(next(sut)), [0, 1, 2, 3])
        let last = next(sut)
        XCTAssertEqual(ids(last), [0, 1, 2, 3, 4])
        XCTAssertEqual(last?.hasNextPage, false)
        XCTAssertEqual(ids(next(sut)), [0, 1, 2, 3, 4], "the end reached: the list as it is")
        XCTAssertEqual(source.requests, [nil, 2, 4], "and no request")
    }

    func test_concurrentCallsForAKey_shareOneRequest() {
        let source = PageSource(count: 5)
        let sut = makeSUT(source)
        _ = next(sut)
        source.holds = true
        let first = LoadRecorder<StoreResponse<List>>()
        let second = LoadRecorder<StoreResponse<List>>()

        let tokens = [first.load(sut.nextPage(of: "feed")), second.load(sut.nextPage(of: "feed"))]
        source.release()

        XCTAssertEqual(source.requests, [nil, 2])
        XCTAssertEqual(first.values.map { $0.value?.items.count }, [4])
        XCTAssertEqual(second.values.map { $0.value?.items.count }, [4])
        withExtendedLifetime(tokens) {}
    }

    func test_aNextPageLoader_keptAfterItsPagedStoreIsReleased_failsWithCancellation_andAsksNothing() {
        let source = PageSource(count: 5)
        var sut: PagedStore<String, Post, Int>? = makeSUT(source)
        _ = next(sut!)
        let loader = sut!.nextPage(of: "feed")
        weak let store = sut?.store
        sut = nil
        XCTAssertNil(store, "the paged store owned its store")
        let recorder = LoadRecorder<StoreResponse<List>>()

        let token = recorder.load(loader)

        XCTAssertEqual(recorder.errors.count, 1)
        XCTAssertTrue(recorder.errors.first is CancellationError)
        XCTAssertEqual(source.requests, [nil], "no page asked for")
        withExtendedLifetime(token) {}
    }

    func test_aPageCap_dropsTheOldestPages_andARefreshStartsFromTheFirstKept() {
        let source = PageSource(count: 10)
        let sut = makeSUT(source, maxPages: 2)
        for _ in 0..<3 { _ = next(sut) }
        XCTAssertEqual(ids(shown(sut)), [2, 3, 4, 5])

        _ = refresh(sut)

        XCTAssertEqual(source.requests.suffix(1), [2], "from the first page kept; unchanged there, so it stops")
    }

    func test_refresh_revalidatesTheLoadedPagesInOrder_andStopsAtTheFirstUnchanged() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = next(sut) }
        source.posts[1].text = "edited on the server"

        let refreshed = refresh(sut)

        XCTAssertEqual(source.requests.suffix(2), [nil, 2], "page 1 changed, page 2 did not: page 3 is kept")
        XCTAssertEqual(refreshed?.items.map(\.text)[1], "edited on the server")
        XCTAssertEqual(ids(refreshed), [0, 1, 2, 3, 4, 5])
    }

    func test_refresh_withNothingChanged_asksForTheFirstPageOnly() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = next(sut) }

        _ = refresh(sut)

        XCTAssertEqual(source.requests.suffix(1), [nil])
        XCTAssertEqual(source.requests.count, 4)
    }

    func test_refresh_afterAnItemWasAddedAtTheTop_loadsAgainEveryPageItHad() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<2 { _ = next(sut) }
        source.posts.insert(Post(id: 100, text: "new"), at: 0)

        let refreshed = refresh(sut)

        XCTAssertEqual(source.requests.suffix(2), [nil, 2], "every page shifted; as many pages as it had")
        XCTAssertEqual(ids(refreshed), [100, 0, 1, 2])
        XCTAssertEqual(refreshed?.nextCursor, 4)
    }

    func test_refresh_whenTheSourceEndsEarlier_theListEndsThere() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = next(sut) }
        source.posts = Array(source.posts.prefix(1))

        let refreshed = refresh(sut)

        XCTAssertEqual(ids(refreshed), [0])
        XCTAssertEqual(refreshed?.hasNextPage, false)
    }

    func test_aPageThatFailsDuringARefresh_failsIt_andTheListStaysAsItWas() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = next(sut) }
        source.posts[0].text = "changed"
        source.fail(at: 2)

        let result = LoadRecorder<StoreResponse<List>>()
        _ = result.load(sut.store.freshValue(of: "feed"))

        XCTAssertEqual(result.errors.count, 1)
        XCTAssertEqual(shown(sut)?.items.first?.text, "post 0", "nothing of the failed refresh is shown")
        XCTAssertEqual(ids(shown(sut)), [0, 1, 2, 3, 4, 5])
    }

    func test_aFailedNextPage_failsThatCall_andLeavesTheList() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        _ = next(sut)
        source.fail(at: 2)

        let result = LoadRecorder<StoreResponse<List>>()
        _ = result.load(sut.nextPage(of: "feed"))

        XCTAssertEqual(result.errors.count, 1)
        XCTAssertEqual(ids(shown(sut)), [0, 1])
    }

    func test_aPageThatArrivesAfterARefreshChangedTheList_isDropped() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        _ = next(sut)
        source.holds = true
        let appended = LoadRecorder<StoreResponse<List>>()
        let token = appended.load(sut.nextPage(of: "feed"))
        source.posts = [Post(id: 50, text: "other")] + source.posts

        source.holds = false
        _ = refresh(sut)  // the first page changed, and with it the cursor after it
        source.release()

        XCTAssertEqual(ids(shown(sut)), [50, 0], "the page loaded for the old list is not appended to the new one")
        withExtendedLifetime(token) {}
    }

    func test_aPageLoadedWhileALiveChangeRewroteTheLastPage_isDropped_butOneOfAnEarlierPage_isNot() {
        for (editedID, appends) in [(3, false), (0, true)] {
            let source = PageSource(count: 6)
            let sut = makeSUT(source)
            for _ in 0..<2 { _ = next(sut) }
            source.holds = true
            let appended = LoadRecorder<StoreResponse<List>>()
            let token = appended.load(sut.nextPage(of: "feed"))

            sut.store.update("feed") { $0?.replacing(Post(id: editedID, text: "edited live")) }
            source.release()

            let expected = appends ? [0, 1, 2, 3, 4, 5] : [0, 1, 2, 3]
            XCTAssertEqual(ids(shown(sut)), expected, "post \(editedID) edited while the next page loaded")
            XCTAssertEqual(shown(sut)?.items.first { $0.id == editedID }?.text, "edited live")
            withExtendedLifetime(token) {}
        }
    }

    func test_aLiveChange_reachesThePageThatHoldsTheItem_andARefreshThenFindsItUnchanged() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = next(sut) }
        let observed = StreamRecorder(sut.store.changes(for: "feed"))

        let edited = Post(id: 3, text: "edited live")
        source.posts[3] = edited
        sut.store.update("feed") { $0?.replacing(edited) }

        XCTAssertEqual(observed.values.last?.value?.pages[1].page.items.map(\.text), ["post 2", "edited live"])
        _ = refresh(sut)
        XCTAssertEqual(source.requests.suffix(1), [nil], "the live change matched the server: unchanged")
    }

    func test_pagesAreSavedInTheLevels_andAStoreOnTheSameDiskShowsThem() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pages-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let source = PageSource(count: 6)
        let first = makeSUT(source, levels: [.cache(DiskCache<String, List>(directory: directory), name: "disk")])
        for _ in 0..<2 { _ = next(first) }

        let relaunched = makeSUT(source, levels: [.cache(DiskCache<String, List>(directory: directory), name: "disk")])
        let shown = shown(relaunched)

        XCTAssertEqual(ids(shown), [0, 1, 2, 3])
        XCTAssertEqual(source.requests, [nil, 2], "read from the disk")
    }

    func test_anObservedListThatIsInvalidated_isRevalidated() {
        let source = PageSource(count: 6)
        let sut = makeSUT(source)
        for _ in 0..<2 { _ = next(sut) }
        let observed = StreamRecorder(sut.store.changes(for: "feed"))
        source.posts[0].text = "changed"

        sut.store.invalidate("feed")

        XCTAssertEqual(source.requests.suffix(2), [nil, 2])
        XCTAssertEqual(observed.values.last?.value?.items.first?.text, "changed")
    }

    func test_aRefreshOfManyPagesAnsweredAtOnce_runsInConstantStackDepth() {
        let count = scaled(100_000, floor: 20_000)  // more pages than a stack holds frames, were answers to recurse
        let source = PageSource(count: count, pageSize: 1)
        let sut = makeSUT(source)
        let pages = (0..<count).map { Page<Post, Int>(items: [Post(id: $0, text: "")], nextCursor: $0 + 1) }
        let list = List(
            pages: pages.enumerated().map { .init(cursor: $0.offset == 0 ? nil : $0.offset, page: $0.element) })
        sut.store.write(list, for: "feed")

        let refreshed = refresh(sut)

        XCTAssertEqual(refreshed?.pages.count, count, "every page differed (their texts): all loaded again")
    }

    // MARK: Helpers

    private func makeSUT(
        _ source: PageSource, maxPages: Int? = nil, levels: [StoreLevel<String, List>]? = nil
    ) -> PagedStore<String, Post, Int> {
        PagedStore(levels: levels ?? [.cache(MemoryCache<String, List>(), name: "memory")], maxPages: maxPages) {
            (_: String, cursor: Int?) in source.page(at: cursor)
        }
    }

    private func next(_ sut: PagedStore<String, Post, Int>) -> List? {
        answer(of: sut.nextPage(of: "feed"))
    }

    private func refresh(_ sut: PagedStore<String, Post, Int>) -> List? {
        answer(of: sut.store.freshValue(of: "feed"))
    }

    private func shown(_ sut: PagedStore<String, Post, Int>) -> List? {
        answer(of: sut.store.read("feed", policy: .cacheOnly))
    }

    /// The list a load answers with, once it has (a disk level answers on its own queue).
    private func answer(of loader: AnyLoader<StoreResponse<List>>) -> List? {
        let recorder = LoadRecorder<StoreResponse<List>>()
        let token = recorder.load(loader)
        XCTAssertTrue(eventually { recorder.count > 0 }, "the load never answered")
        withExtendedLifetime(token) {}
        return recorder.values.first?.value
    }

    private func ids(_ list: List?) -> [Int] {
        list?.items.map(\.id) ?? []
    }
}
