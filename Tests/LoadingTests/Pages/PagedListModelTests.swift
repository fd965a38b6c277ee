#if canImport(Observation)
    import Foundation
    import Loading
    import LoadingScreens
    import LoadingTestSupport
    import XCTest

    @MainActor
    final class PagedListModelTests: XCTestCase {
        func test_loadsThePages_showsLoadingMore_andTheEnd() async {
            let source = PageSource(count: 3)
            source.holds = true
            let model = makeSUT(source)

            model.load()
            XCTAssertTrue(model.list.isLoading)
            source.release()
            await until { model.items.map(\.id) == [0, 1] }
            XCTAssertFalse(model.isEndReached)

            source.holds = true
            model.loadNextPage()
            XCTAssertTrue(model.isLoadingNextPage)
            model.loadNextPage()
            source.release()
            await until { !model.isLoadingNextPage }

            XCTAssertEqual(model.items.map(\.id), [0, 1, 2])
            XCTAssertTrue(model.isEndReached)
            XCTAssertEqual(source.requests, [nil, 2], "a second call while a page loads asks nothing")
            model.loadNextPage()
            XCTAssertFalse(model.isLoadingNextPage, "the end: nothing to load")
        }

        func test_aListOpenedInTheMiddle_loadsThePagesAbove_untilItsStart() async {
            let source = PageSource(count: 6, anchor: 4)
            let model = makeSUT(source)
            model.load()
            await until { model.items.map(\.id) == [4, 5] }
            XCTAssertFalse(model.isStartReached)
            XCTAssertTrue(model.isEndReached)

            source.holds = true
            model.loadPreviousPage()
            XCTAssertTrue(model.isLoadingPreviousPage)
            model.loadPreviousPage()
            source.release()
            await until { !model.isLoadingPreviousPage }
            XCTAssertEqual(model.items.map(\.id), [2, 3, 4, 5])

            source.fail(at: 0)
            model.loadPreviousPage()
            await until { model.previousPageError != nil }
            XCTAssertEqual(model.items.map(\.id), [2, 3, 4, 5], "the pages loaded stay")

            source.recover(at: 0)
            model.loadPreviousPage()
            await until { model.isStartReached }
            XCTAssertEqual(model.items.map(\.id), [0, 1, 2, 3, 4, 5])
            XCTAssertNil(model.previousPageError)
            XCTAssertEqual(source.requests, [nil, 2, 0, 0], "a second call while a page loads asks nothing")
        }

        func test_aFailedPage_isShownWithItsError_andThePagesLoadedStay() async {
            let source = PageSource(count: 4)
            let model = makeSUT(source)
            model.load()
            await until { !model.items.isEmpty }
            source.fail(at: 2)

            model.loadNextPage()
            await until { model.nextPageError != nil }

            XCTAssertEqual(model.items.map(\.id), [0, 1], "the pages loaded stay")
            XCTAssertFalse(model.isLoadingNextPage)
            XCTAssertFalse(model.isEndReached)
        }

        func test_retry_afterAFailedPage_loadsIt() async {
            let failing = Locked(true)
            let source = PageSource(count: 4)
            let store = PagedStore(levels: [], maxPages: nil) { (_: String, cursor: Int?) in
                AnyLoader<Page<Post, Int>> { completion in
                    if cursor != nil, failing.withLock({ $0 }) {
                        completion(.failure(TestError(id: 1)))
                        return AnyCancellationToken {}
                    }
                    return source.page(at: cursor).load(completion: completion)
                }
            }
            let model = PagedListModel(store: store, key: "feed")
            model.load()
            await until { !model.items.isEmpty }

            model.loadNextPage()
            await until { model.nextPageError != nil }
            failing.withLock { $0 = false }
            model.loadNextPage()
            await until { model.items.count == 4 }

            XCTAssertNil(model.nextPageError)
            XCTAssertTrue(model.isEndReached)
        }

        private func makeSUT(_ source: PageSource) -> PagedListModel<String, Post, Int> {
            let store = PagedStore(levels: [], maxPages: nil) { (_: String, cursor: Int?) in source.page(at: cursor) }
            return PagedListModel(store: store, key: "feed")
        }

        private func until(
            _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
        ) async {
            let held = await eventuallyOnMainActor(condition)
            XCTAssertTrue(held, "the condition did not hold within the watchdog (60 s)", file: file, line: line)
        }
    }
#endif
