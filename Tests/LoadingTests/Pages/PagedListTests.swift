import Loading
import XCTest

final class PagedListTests: XCTestCase {
    private typealias List = PagedList<Post, Int>

    func test_appending_keepsPagesInOrder_andACapDropsTheOldest() {
        var list = List(firstPage: page([0, 1], next: 2))
        list = list.appending(page([2, 3], next: 4), loadedWith: 2, maxPages: 2)
        XCTAssertEqual(list.items.map(\.id), [0, 1, 2, 3])
        XCTAssertTrue(list.startsAtFirstPage)

        list = list.appending(page([4], next: nil), loadedWith: 4, maxPages: 2)

        XCTAssertEqual(list.items.map(\.id), [2, 3, 4])
        XCTAssertEqual(list.pages.map(\.cursor), [2, 4])
        XCTAssertFalse(list.startsAtFirstPage)
        XCTAssertFalse(list.hasNextPage)
    }

    func test_replacing_changesTheItemInThePageThatHoldsIt_only() {
        let list = List(firstPage: page([0, 1], next: 2)).appending(page([2, 3], next: nil), loadedWith: 2)

        let edited = list.replacing(Post(id: 3, text: "edited"))

        XCTAssertEqual(edited.pages[0], list.pages[0])
        XCTAssertEqual(edited.pages[1].page.items.map(\.text), ["post 2", "edited"])
        XCTAssertEqual(list.replacing(Post(id: 99, text: "unknown")), list)
    }

    func test_removing_andInserting_touchTheRightPage() {
        let list = List(firstPage: page([0, 1], next: 2)).appending(page([2, 3], next: nil), loadedWith: 2)

        XCTAssertEqual(list.removing(id: 2).pages.map { $0.page.items.map(\.id) }, [[0, 1], [3]])
        XCTAssertEqual(
            list.inserting(Post(id: 10, text: "new")).pages.map { $0.page.items.map(\.id) }, [[10, 0, 1], [2, 3]])
        let capped = list.appending(page([4], next: nil), loadedWith: 4, maxPages: 1)
        XCTAssertEqual(capped.inserting(Post(id: 10, text: "new")), capped, "no first page to put it in")
    }

    func test_aListIsCodable() throws {
        let list = List(firstPage: page([0, 1], next: 2)).appending(page([2], next: nil), loadedWith: 2)
        let decoded = try JSONDecoder().decode(List.self, from: JSONEncoder().encode(list))
        XCTAssertEqual(decoded, list)
    }

    private func page(_ ids: [Int], next: Int?) -> Page<Post, Int> {
        Page(items: ids.map { Post(id: $0, text: "post \($0)") }, nextCursor: next)
    }
}
