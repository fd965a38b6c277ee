import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// Lists that grow both ways (a chat, a timeline opened in the middle): pages added before the first as well as after
/// the last, a cap dropping pages at the far end, and the refresh rule kept.
final class PagedListBothWaysTests: XCTestCase {
    private typealias List = PagedList<Post, Int>

    // MARK: The list

    func test_prepending_addsBeforeTheFirstPage_andTheListKnowsThePageBeforeIt() {
        let middle = List(firstPage: page([4, 5], next: 6, previous: 2))

        let list = middle.prepending(page([2, 3], next: 4, previous: 0), loadedWith: 2)

        XCTAssertEqual(ids(list), [2, 3, 4, 5])
        XCTAssertEqual(list.previousCursor, 0)
        XCTAssertTrue(list.hasPreviousPage)
        XCTAssertEqual(list.nextCursor, 6, "the end is where it was")
        XCTAssertEqual(ids(middle), [4, 5], "a list is a value: the one prepended to is unchanged")
    }

    func test_aCap_dropsThePagesAtTheOtherEnd_fromWhereAPageIsAdded() {
        let middle = List(firstPage: page([4, 5], next: 6, previous: 2))
            .appending(page([6, 7], next: 8, previous: 4), loadedWith: 6)

        let up = middle.prepending(page([2, 3], next: 4, previous: 0), loadedWith: 2, maxPages: 2)
        XCTAssertEqual(ids(up), [2, 3, 4, 5], "the last page goes")
        XCTAssertEqual(up.nextCursor, 6, "and the next cursor leads back to it")

        let down = middle.appending(page([8, 9], next: nil, previous: 6), loadedWith: 8, maxPages: 2)
        XCTAssertEqual(ids(down), [6, 7, 8, 9], "the first page goes")
        XCTAssertEqual(down.previousCursor, 4, "and the previous cursor leads back to it")
    }

    func test_startsAtFirstPage_onlyOnceThePageWithNoPreviousOneIsHeld() {
        let middle = List(firstPage: page([4, 5], next: 6, previous: 2))
        XCTAssertFalse(middle.startsAtFirstPage, "opened in the middle")

        let top = middle.prepending(page([2, 3], next: 4, previous: 0), loadedWith: 2)
            .prepending(page([0, 1], next: 2, previous: nil), loadedWith: 0)
        XCTAssertTrue(top.startsAtFirstPage)
        XCTAssertFalse(top.hasPreviousPage)

        let capped = top.appending(page([6, 7], next: nil, previous: 4), loadedWith: 6, maxPages: 2)
        XCTAssertFalse(capped.startsAtFirstPage, "the cap left the top behind")
        XCTAssertEqual(capped.previousCursor, 2)
    }

    func test_aPreviousCursorLoadedAlready_startsTheList() {
        let list = List(firstPage: page([4, 5], next: 6, previous: 2))
            .prepending(page([2, 3], next: 4, previous: 0), loadedWith: 2)
            .prepending(page([0, 1], next: 2, previous: 2), loadedWith: 0)  // a server pointing back down

        XCTAssertFalse(list.hasPreviousPage)
        XCTAssertEqual(ids(list), [0, 1, 2, 3, 4, 5])
    }

    func test_prependingIdentifiableItems_dropsThoseTheListShowsAlready() {
        let list = List(firstPage: page([4, 5], next: 6, previous: 2))
            .prepending(page([3, 4], next: 5, previous: 1), loadedWith: 2)

        XCTAssertEqual(ids(list), [3, 4, 5])
    }

    func test_versionsGrowingEachTheirOwnWay_shareNothingTheyDidNotAdd() {
        let base = List(firstPage: page([4, 5], next: 6, previous: 2))
        let up = base.prepending(page([2, 3], next: 4, previous: 0), loadedWith: 2)
        let down = base.appending(page([6, 7], next: 8, previous: 4), loadedWith: 6)
        let otherUp = base.prepending(page([20, 30], next: 4, previous: nil), loadedWith: 2)
        let upThenDown = up.appending(page([6, 7], next: nil, previous: 4), loadedWith: 6)

        XCTAssertEqual(ids(base), [4, 5])
        XCTAssertEqual(ids(up), [2, 3, 4, 5])
        XCTAssertEqual(ids(down), [4, 5, 6, 7])
        XCTAssertEqual(ids(otherUp), [20, 30, 4, 5])
        XCTAssertEqual(ids(upThenDown), [2, 3, 4, 5, 6, 7])
        XCTAssertEqual(ids(up), [2, 3, 4, 5], "unchanged by the versions grown from it")
    }

    func test_manyPagesPrependedAndCapped_keepTheListWhole() {
        var list = List(firstPage: page([10_000, 10_001], next: nil, previous: 9_998))
        for start in stride(from: 9_998, to: 7_998, by: -2) {
            list = list.prepending(page([start, start + 1], next: start + 2, previous: start - 2), loadedWith: start)
        }
        XCTAssertEqual(list.pages.count, 1_001)
        XCTAssertEqual(ids(list).first, 8_000)

        let capped = list.prepending(
            page([7_998, 7_999], next: 8_000, previous: 7_996), loadedWith: 7_998, maxPages: 3)
        XCTAssertEqual(ids(capped), [7_998, 7_999, 8_000, 8_001, 8_002, 8_003])
    }

    func test_aListThatGrewBackward_isCodable_andAListSavedBeforeItCouldStillDecodes() throws {
        let list = List(firstPage: page([2, 3], next: 4, previous: 0))
            .prepending(page([0, 1], next: 2, previous: nil), loadedWith: 0)
        let decoded = try JSONDecoder().decode(List.self, from: JSONEncoder().encode(list))
        XCTAssertEqual(decoded, list)
        XCTAssertTrue(decoded.startsAtFirstPage)

        let saved = #"{"pages":[{"page":{"items":[{"id":0,"text":"0"}],"nextCursor":1}}]}"#
        let old = try JSONDecoder().decode(List.self, from: Data(saved.utf8))
        XCTAssertEqual(ids(old), [0])
        XCTAssertTrue(old.startsAtFirstPage)
        XCTAssertNil(old.previousCursor)
    }

    // MARK: The store

    func test_loadPreviousPage_loadsTheFirstPage_thenEachBefore_andStopsAtTheTop() {
        let source = PageSource(count: 10, anchor: 6)
        let sut = makeSUT(source)

        XCTAssertEqual(ids(answer(of: sut.previousPage(of: "chat"))), [6, 7], "no list yet: the first page")
        XCTAssertEqual(ids(answer(of: sut.previousPage(of: "chat"))), [4, 5, 6, 7])
        XCTAssertEqual(ids(answer(of: sut.previousPage(of: "chat"))), [2, 3, 4, 5, 6, 7])
        let top = answer(of: sut.previousPage(of: "chat"))
        XCTAssertEqual(ids(top), [0, 1, 2, 3, 4, 5, 6, 7])
        XCTAssertEqual(top?.startsAtFirstPage, true)
        XCTAssertEqual(ids(answer(of: sut.previousPage(of: "chat"))), [0, 1, 2, 3, 4, 5, 6, 7], "the top: as it is")
        XCTAssertEqual(ids(answer(of: sut.nextPage(of: "chat"))), Array(0..<10), "and down again")
        XCTAssertEqual(source.requests, [nil, 4, 2, 0, 8])
    }

    func test_aCappedStore_dropsTheEndWhenGoingUp_andLoadsItAgainGoingDown() {
        let source = PageSource(count: 10, anchor: 4)
        let sut = makeSUT(source, maxPages: 2)
        _ = answer(of: sut.nextPage(of: "chat"))
        _ = answer(of: sut.nextPage(of: "chat"))
        XCTAssertEqual(ids(shown(sut)), [4, 5, 6, 7])

        XCTAssertEqual(ids(answer(of: sut.previousPage(of: "chat"))), [2, 3, 4, 5])
        XCTAssertEqual(ids(answer(of: sut.nextPage(of: "chat"))), [4, 5, 6, 7])
        XCTAssertEqual(source.requests, [nil, 6, 2, 6])
    }

    func test_aPreviousPageThatArrivesAfterTheFirstPageChanged_isDropped() {
        let source = PageSource(count: 10, anchor: 4)
        let sut = makeSUT(source)
        _ = answer(of: sut.nextPage(of: "chat"))
        source.holds = true
        let previous = LoadRecorder<StoreResponse<List>>()
        let token = previous.load(sut.previousPage(of: "chat"))

        sut.store.update("chat") { $0?.replacing(Post(id: 4, text: "edited")) }
        source.release()

        XCTAssertEqual(ids(previous.values.first?.value), [4, 5], "its cursor may point elsewhere now")
        withExtendedLifetime(token) {}
    }

    func test_aRefreshOfAListThatGrewBackward_startsFromItsFirstPage_andStopsAtTheFirstUnchanged() {
        let source = PageSource(count: 10, anchor: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = answer(of: sut.previousPage(of: "chat")) }
        XCTAssertEqual(ids(shown(sut)), [2, 3, 4, 5, 6, 7])
        source.posts[2].text = "edited on the server"

        let refreshed = answer(of: sut.store.freshValue(of: "chat"))

        XCTAssertEqual(refreshed?.items.map(\.text).first, "edited on the server")
        XCTAssertEqual(ids(refreshed), [2, 3, 4, 5, 6, 7])
        XCTAssertEqual(
            source.requests.suffix(2), [2, 4], "the first page changed, the second did not: the rest is kept")
        XCTAssertEqual(refreshed?.previousCursor, 0)
    }

    func test_aRefreshReachingTheFirstPageLoaded_comparesItsItems_notTheCursorItWasLoadedWith() {
        let source = PageSource(count: 10, anchor: 6)
        let sut = makeSUT(source)
        for _ in 0..<3 { _ = answer(of: sut.previousPage(of: "chat")) }
        _ = answer(of: sut.nextPage(of: "chat"))
        XCTAssertEqual(ids(shown(sut)), [2, 3, 4, 5, 6, 7, 8, 9])
        source.posts[2].text = "edited"
        source.posts[4].text = "edited too"

        let refreshed = answer(of: sut.store.freshValue(of: "chat"))

        XCTAssertEqual(refreshed?.items.map(\.text).prefix(3), ["edited", "post 3", "edited too"])
        XCTAssertEqual(
            source.requests.suffix(3), [2, 4, 6],
            "the page opened first (with no cursor) is reached by a cursor now, and is unchanged: the walk stops")
    }

    // MARK: Helpers

    private func page(_ ids: [Int], next: Int?, previous: Int?) -> Page<Post, Int> {
        Page(items: ids.map { Post(id: $0, text: "\($0)") }, nextCursor: next, previousCursor: previous)
    }

    private func ids(_ list: List?) -> [Int] {
        list?.items.map(\.id) ?? []
    }

    private func makeSUT(_ source: PageSource, maxPages: Int? = nil) -> PagedStore<String, Post, Int> {
        PagedStore(levels: [.cache(MemoryCache<String, List>(), name: "memory")], maxPages: maxPages) {
            (_: String, cursor: Int?) in source.page(at: cursor)
        }
    }

    private func shown(_ sut: PagedStore<String, Post, Int>) -> List? {
        answer(of: sut.store.read("chat", policy: .cacheOnly))
    }

    private func answer(of loader: AnyLoader<StoreResponse<List>>) -> List? {
        let recorder = LoadRecorder<StoreResponse<List>>()
        let token = recorder.load(loader)
        XCTAssertTrue(eventually { recorder.count > 0 }, "the load never answered")
        withExtendedLifetime(token) {}
        return recorder.values.first?.value
    }
}
