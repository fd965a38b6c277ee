import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// What a server's paging must not break: a cursor that repeats ends the list instead of growing it for ever, an item
/// shown on two pages is shown once and edited or removed everywhere, and appending stays cheap as the list grows.
final class PagedListDefectTests: XCTestCase {
    private typealias List = PagedList<Post, Int>

    // MARK: Repeating cursors

    func test_aServerAnsweringEveryPageWithTheSameCursor_endsTheListAfterThatPage() {
        let sut = PagedStore(levels: [.cache(MemoryCache<String, List>(), name: "memory")]) {
            (_: String, cursor: Int?) in
            AnyLoader<Page<Post, Int>> { completion in
                completion(.success(Page(items: [Post(id: (cursor ?? 0) + 100, text: "p")], nextCursor: 7)))
                return AnyCancellationToken {}
            }
        }

        for _ in 0..<10 { _ = next(sut) }

        let list = next(sut)
        XCTAssertEqual(list?.pages.map(\.cursor), [nil, 7], "the page loaded with 7 points to 7 again: the end")
        XCTAssertEqual(list?.hasNextPage, false)
    }

    func test_aCursorCyclingBackToAnEarlierPage_endsTheList() {
        let cycle = [nil: 1, 1: 2, 2: 1] as [Int?: Int]
        var list = List(firstPage: page([0], next: cycle[nil]!))
        list = list.appending(page([1], next: cycle[1]!), loadedWith: 1)
        list = list.appending(page([2], next: cycle[2]!), loadedWith: 2)

        XCTAssertFalse(list.hasNextPage, "page 2 points back to cursor 1, loaded already")
        XCTAssertEqual(list.items.map(\.id), [0, 1, 2])
    }

    func test_cursorsOfAnotherTypeThanHashable_stillLoadEveryPage() {
        var list = PagedList<Int, Token>(firstPage: Page(items: [0], nextCursor: Token(value: 1)))
        list = list.appending(Page(items: [1], nextCursor: Token(value: 2)), loadedWith: Token(value: 1))
        XCTAssertEqual(list.nextCursor?.value, 2)
    }

    func test_distinctCursorsWhoseHashesCollide_stillLoadEveryPage_andARepeatStillEndsTheList() {
        var list = PagedList<Int, CollidingCursor>(firstPage: Page(items: [0], nextCursor: CollidingCursor(value: 1)))
        list = list.appending(
            Page(items: [1], nextCursor: CollidingCursor(value: 2)), loadedWith: CollidingCursor(value: 1))
        XCTAssertEqual(list.nextCursor?.value, 2, "2 hashes as 1 does, yet it is another cursor")

        list = list.appending(
            Page(items: [2], nextCursor: CollidingCursor(value: 1)), loadedWith: CollidingCursor(value: 2))
        XCTAssertFalse(list.hasNextPage, "the page loaded with 2 points back to 1, loaded already")
        XCTAssertEqual(list.items, [0, 1, 2])
    }

    // MARK: Items shown twice

    func test_anItemOnTwoPages_isShownOnce_andRemovingOrReplacingIt_reachesEveryCopy() {
        // Offset paging after an insert at the top: page 2 starts with the last item of page 1.
        var list = List(firstPage: page([0, 1, 2], next: 3))
        list = list.appending(page([2, 3, 4], next: nil), loadedWith: 3)
        XCTAssertEqual(list.items.map(\.id), [0, 1, 2, 3, 4], "a next page's items shown already are dropped")

        let built = List(pages: [
            .init(cursor: nil, page: page([0, 1, 2], next: 3)), .init(cursor: 3, page: page([2, 3], next: nil)),
        ])
        XCTAssertEqual(built.removing(id: 2).items.map(\.id), [0, 1, 3], "a deleted post disappears everywhere")
        XCTAssertEqual(
            built.replacing(Post(id: 2, text: "edited")).items.filter { $0.id == 2 }.map(\.text),
            ["edited", "edited"])
    }

    func test_aPagedStoreOfIdentifiableItems_dropsANextPagesItemsShownAlready() {
        let source = PageSource(count: 6, pageSize: 3)
        let sut = PagedStore(levels: [.cache(MemoryCache<String, List>(), name: "memory")]) {
            (_: String, offset: Int?) in source.page(at: offset)
        }
        _ = next(sut)
        source.posts.insert(Post(id: 100, text: "new at the top"), at: 0)  // every offset moves by one

        let list = next(sut)

        XCTAssertEqual(list?.items.map(\.id), [0, 1, 2, 3, 4], "2 came again at offset 3: shown once")
    }

    // MARK: Versions

    func test_anOlderVersionAppendedTo_copiesItsPages_andLeavesTheNewerOneAsItWas() {
        let base = List(firstPage: page([0], next: 1))
        let newer = base.appending(page([1], next: 2), loadedWith: 1)
        let other = base.appending(page([9], next: nil), loadedWith: 1)

        XCTAssertEqual(newer.items.map(\.id), [0, 1])
        XCTAssertEqual(other.items.map(\.id), [0, 9])
        XCTAssertEqual(base.items.map(\.id), [0])
        XCTAssertEqual(newer.appending(page([2], next: nil), loadedWith: 2).items.map(\.id), [0, 1, 2])
    }

    func test_aCappedListAppendedToForLong_keepsOnlyItsPages() throws {
        var list = PagedList<Int, Int>(firstPage: Page(items: [0], nextCursor: 1))
        for number in 1..<1_000 {
            list = list.appending(Page(items: [number], nextCursor: number + 1), loadedWith: number, maxPages: 3)
        }
        XCTAssertEqual(list.items, [997, 998, 999])
        let data = try JSONEncoder().encode(list)
        XCTAssertEqual(try JSONDecoder().decode(PagedList<Int, Int>.self, from: data), list)
        XCTAssertLessThan(data.count, 400, "the dropped pages are not part of the list")
    }

    // MARK: Helpers

    private func next(_ sut: PagedStore<String, Post, Int>) -> List? {
        let recorder = LoadRecorder<StoreResponse<List>>()
        _ = recorder.load(sut.nextPage(of: "feed"))
        return recorder.values.last?.value
    }

    private func page(_ ids: [Int], next: Int?) -> Page<Post, Int> {
        Page(items: ids.map { Post(id: $0, text: "post \($0)") }, nextCursor: next)
    }
}

/// A cursor that is not hashable.
private struct Token: Sendable, Equatable {
    let value: Int
}

/// A cursor whose every value hashes alike: only equality tells two apart.
private struct CollidingCursor: Hashable, Sendable {
    let value: Int

    func hash(into hasher: inout Hasher) {
        hasher.combine(0)
    }
}
