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

    func test_aCappedList_showsAgainAnItemOnlyADroppedPageShowed_andDropsOneAKeptPageShows() {
        var list = List(firstPage: page([0, 1], next: 2))
        list = list.appending(page([2, 3], next: 4), loadedWith: 2, maxPages: 2)

        // The cap drops the first page: 1 is shown nowhere else, so the new page keeps it; 3 is still shown.
        list = list.appending(page([4, 1, 3], next: 6), loadedWith: 4, maxPages: 2)
        XCTAssertEqual(list.items.map(\.id), [2, 3, 4, 1])

        // The cap drops [2, 3]: 3 comes back; 1 is on the page that stays.
        list = list.appending(page([3, 1, 5], next: nil), loadedWith: 6, maxPages: 2)
        XCTAssertEqual(list.items.map(\.id), [4, 1, 3, 5])
    }

    func test_aCappedListGrowingBackward_showsAgainAnItemOnlyADroppedPageShowed() {
        var list = List(
            firstPage: Page(
                items: [Post(id: 8, text: "p"), Post(id: 9, text: "p")], nextCursor: nil,
                previousCursor: 6))
        list = list.prepending(
            Page(items: [Post(id: 6, text: "p"), Post(id: 7, text: "p")], nextCursor: 8, previousCursor: 4),
            loadedWith: 6, maxPages: 2)

        list = list.prepending(
            Page(items: [Post(id: 9, text: "p"), Post(id: 7, text: "p")], nextCursor: 6, previousCursor: nil),
            loadedWith: 4, maxPages: 2)

        XCTAssertEqual(list.items.map(\.id), [9, 6, 7], "9 was only on the page the cap dropped; 7 is still shown")
    }

    func test_anItemShownOnTwoPagesOfAListMadeAnew_staysShownWhenACapDropsOneOfThem() {
        // A list made from pages (decoded, say) may show an id twice: dropping one copy leaves it shown.
        let made = List(pages: [
            .init(cursor: nil, page: page([0, 1], next: 2)), .init(cursor: 2, page: page([1, 2], next: 4)),
        ])

        let list = made.appending(page([1, 3], next: nil), loadedWith: 4, maxPages: 2)

        XCTAssertEqual(list.items.map(\.id), [1, 2, 3], "1 is still shown on the page that stays")
    }

    func test_appendingToACappedListOfIdentifiableItems_readsTheIdsOfThePagesItAddsAndDrops_notOfTheWholeList() {
        // What an append costs must not grow with the pages kept: counted as the ids it reads (an id is the items'
        // code), for a list capped at 10 pages and at 100.
        for cap in [10, 100] {
            let reads = Locked(0)
            var list = PagedList<Counted, Int>(
                firstPage: Page(items: [Counted(number: 0, reads: reads)], nextCursor: 1))
            for number in 1..<(cap + 50) {
                let items = (0..<5).map { Counted(number: number * 5 + $0, reads: reads) }
                list = list.appending(Page(items: items, nextCursor: number + 1), loadedWith: number, maxPages: cap)
            }
            reads.withLock { $0 = 0 }
            let appends = 20
            for number in (cap + 50)..<(cap + 50 + appends) {
                let items = (0..<5).map { Counted(number: number * 5 + $0, reads: reads) }
                list = list.appending(Page(items: items, nextCursor: number + 1), loadedWith: number, maxPages: cap)
            }
            XCTAssertEqual(list.pages.count, cap)
            // Each append reads the ids of its page and of the page the cap drops (5 each); a list made anew now and
            // then (its dropped pages let go) reads those of its pages once, spread over the appends since.
            XCTAssertLessThanOrEqual(reads.withLock { $0 }, appends * 10 + 5 * cap, "cap \(cap)")
        }
    }

    func test_randomAppendsAndPrepends_underACap_showWhatAPlainModelShows() {
        // The model: pages of ids; a page added is compared with the pages that stay once the cap drops those at the
        // other end, and keeps an id once. Appending to an older version copies its pages (the list's slow path).
        for seed in UInt64(1)...400 {
            var random = SeededRandom(seed: seed)
            let cap = Int.random(in: 1...4, using: &random)
            func items() -> [Int] {
                (0..<Int.random(in: 0...4, using: &random)).map { _ in .random(in: 0..<12, using: &random) }
            }
            let first = items()
            var versions = [(list: List(firstPage: page(first, next: 1)), model: [first])]
            var cursor = 1
            for step in 0..<60 {
                let (list, model) = versions[
                    Int.random(in: max(0, versions.count - 3)..<versions.count, using: &random)]
                let before = Bool.random(using: &random)
                let ids = items()
                cursor += 1
                let added = Page(
                    items: ids.map { Post(id: $0, text: "post \($0)") }, nextCursor: before ? cursor + 1_000 : cursor,
                    previousCursor: before ? -cursor : nil)
                let grown =
                    before
                    ? list.prepending(added, loadedWith: -cursor + 1, maxPages: cap)
                    : list.appending(added, loadedWith: cursor - 1, maxPages: cap)
                var staying = model
                if staying.count + 1 > cap {
                    if before {
                        staying.removeLast(staying.count + 1 - cap)
                    } else {
                        staying.removeFirst(staying.count + 1 - cap)
                    }
                }
                var shown = Set(staying.joined())
                let kept = ids.filter { shown.insert($0).inserted }
                let expected = before ? [kept] + staying : staying + [kept]
                XCTAssertEqual(
                    grown.pages.map { $0.page.items.map(\.id) }, expected, "seed \(seed), step \(step), cap \(cap)")
                versions.append((grown, expected))
            }
        }
    }

    func test_randomAppendsAndLiveChanges_underACap_showWhatAPlainModelShows() {
        // The model: pages of posts. A live change reaches every copy of its id; an insert goes first in the first
        // page while the list still holds its first page (the cap has not dropped it), and replaces a post it holds.
        for seed in UInt64(1)...300 {
            var random = SeededRandom(seed: seed)
            let cap = Int.random(in: 1...4, using: &random)
            let first = randomPosts(atMost: 4, using: &random, "first")
            var list = List(firstPage: Page(items: first, nextCursor: 1))
            var model = [first]
            var holdsFirstPage = true
            for step in 0..<40 {
                let edit = Post(id: .random(in: 0..<10, using: &random), text: "edit \(step)")
                switch Int.random(in: 0..<5, using: &random) {
                case 0:
                    list = list.replacing(edit)
                    model = model.map { $0.map { $0.id == edit.id ? edit : $0 } }
                case 1:
                    list = list.removing(id: edit.id)
                    model = model.map { $0.filter { $0.id != edit.id } }
                case 2:
                    list = list.inserting(edit)
                    if model.joined().contains(where: { $0.id == edit.id }) {
                        model = model.map { $0.map { $0.id == edit.id ? edit : $0 } }
                    } else if holdsFirstPage, !model.isEmpty {
                        model[0].insert(edit, at: 0)
                    }
                default:
                    let added = randomPosts(atMost: 4, using: &random, "page \(step)")
                    list = list.appending(Page(items: added, nextCursor: step + 2), loadedWith: step + 1, maxPages: cap)
                    if model.count + 1 > cap {
                        model.removeFirst(model.count + 1 - cap)
                        holdsFirstPage = false
                    }
                    var shown = Set(model.joined().map(\.id))
                    model.append(added.filter { shown.insert($0.id).inserted })
                }
                XCTAssertEqual(list.pages.map(\.page.items), model, "seed \(seed), step \(step), cap \(cap)")
            }
        }
    }

    func test_randomPagesBothWaysAndInserts_showWhatAPlainModelShows() {
        // The model: pages of posts, with whether the list holds its first page (its first page has no previous
        // cursor and was loaded first or upward). A page added upward with no previous cursor reaches the top; the
        // cap drops pages at the other end. An insert goes first in the first page only while the list holds it.
        for seed in UInt64(1)...300 {
            var random = SeededRandom(seed: seed)
            let cap = Int.random(in: 1...4, using: &random)
            let first = randomPosts(atMost: 3, using: &random, "first")
            var list = List(firstPage: Page(items: first, nextCursor: 1, previousCursor: -1))
            var model = [first]
            var topReached = false  // the first page's previous cursor is nil
            var firstLoadedUpwardOrFirst = true
            var cursor = 1
            for step in 0..<40 {
                cursor += 1
                let added = randomPosts(atMost: 3, using: &random, "page \(step)")
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where list.hasNextPage:
                    list = list.appending(
                        Page(items: added, nextCursor: cursor), loadedWith: list.pages.last?.page.nextCursor,
                        maxPages: cap)
                    if model.count + 1 > cap {
                        model.removeFirst(model.count + 1 - cap)
                        firstLoadedUpwardOrFirst = false
                        topReached = false
                    }
                    var shown = Set(model.joined().map(\.id))
                    model.append(added.filter { shown.insert($0.id).inserted })
                case 1 where list.hasPreviousPage:
                    let reachesTop = Int.random(in: 0..<4, using: &random) == 0
                    let page = Page(
                        items: added, nextCursor: cursor + 1_000, previousCursor: reachesTop ? nil : -cursor)
                    list = list.prepending(page, loadedWith: list.pages.first?.page.previousCursor, maxPages: cap)
                    if model.count + 1 > cap { model.removeLast(model.count + 1 - cap) }
                    var shown = Set(model.joined().map(\.id))
                    model.insert(added.filter { shown.insert($0.id).inserted }, at: 0)
                    (topReached, firstLoadedUpwardOrFirst) = (reachesTop, true)
                default:
                    let edit = Post(id: .random(in: 0..<10, using: &random), text: "edit \(step)")
                    list = list.inserting(edit)
                    if model.joined().contains(where: { $0.id == edit.id }) {
                        model = model.map { $0.map { $0.id == edit.id ? edit : $0 } }
                    } else if topReached, firstLoadedUpwardOrFirst, !model.isEmpty {
                        model[0].insert(edit, at: 0)
                    }
                }
                XCTAssertEqual(list.pages.map(\.page.items), model, "seed \(seed), step \(step), cap \(cap)")
                XCTAssertEqual(
                    list.startsAtFirstPage, topReached && firstLoadedUpwardOrFirst, "seed \(seed), step \(step)")
            }
        }
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

    /// Up to `count` posts with ids from 0 to 9, drawn from `random`, each with `text`.
    private func randomPosts(atMost count: Int, using random: inout SeededRandom, _ text: String) -> [Post] {
        (0..<Int.random(in: 0...count, using: &random)).map { _ in
            Post(id: .random(in: 0..<10, using: &random), text: text)
        }
    }

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

/// An identifiable item that counts how often its id is read.
private struct Counted: Identifiable, Equatable, Sendable {
    let number: Int
    let reads: Locked<Int>

    var id: Int {
        reads.withLock { $0 += 1 }
        return number
    }

    static func == (lhs: Counted, rhs: Counted) -> Bool { lhs.number == rhs.number }
}
