import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A paged store takes the options a store does: a widget follows a paged list another process grows over a shared
/// level (`sharing:`), a paged store tells what happens (`events:`), and bounds the lists it keeps (`keptValues:`).
final class PagedStoreOptionsTests: XCTestCase {
    private typealias Feed = PagedStore<String, String, Int>
    private var directory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("paged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
        super.tearDown()
    }

    func test_aWidgetFollowsAPagedList_thatTheAppGrowsOverASharedLevel() throws {
        let app = try makeFeed()
        let widget = try makeFeed()
        let shown = StreamRecorder(widget.store.changes(for: "home"))

        XCTAssertEqual(loadNextPage(of: "home", in: app)?.items, ["p0", "p1"])
        XCTAssertTrue(
            eventually { shown.values.last?.value?.items == ["p0", "p1"] }, "the widget shows the app's first page")

        XCTAssertEqual(loadNextPage(of: "home", in: app)?.items, ["p0", "p1", "p2", "p3"])
        XCTAssertTrue(
            eventually { shown.values.last?.value?.items == ["p0", "p1", "p2", "p3"] }, "and the next one")
    }

    func test_aPagedStore_tellsItsEvents() throws {
        let events = Locked<[StoreEvent<String>]>([])
        let feed = Feed(
            levels: [.cache(MemoryCache(), name: "memory")],
            events: { event in events.withLock { $0.append(event) } },
            page: { _, cursor in Self.page(after: cursor) })

        _ = loadNextPage(of: "home", in: feed)

        XCTAssertTrue(
            events.withLock { $0 }.contains { event in
                if case .levelRead("home", level: "memory", outcome: .miss) = event { return true }
                return false
            }, "the first page's read of the memory level is told: \(events.withLock { $0 })")
    }

    func test_aPagedStore_keepsAsManyListsAsItIsTold() {
        let level = MemoryCache<String, PagedList<String, Int>>()
        let feed = Feed(levels: [.cache(level, name: "memory")], keptValues: 0) { _, cursor in
            Self.page(after: cursor)
        }
        for key in ["a", "b", "c"] { _ = loadNextPage(of: key, in: feed) }

        XCTAssertEqual(feed.store.count, 0, "no list kept once out of use: the level holds them")
    }

    // MARK: - Helpers

    private func makeFeed() throws -> Feed {
        let shared = DiskCache<String, PagedList<String, Int>>(directory: directory.appendingPathComponent("shared"))
        return Feed(
            levels: [.cache(MemoryCache(), name: "memory"), .cache(shared, name: "shared")],
            sharing: try .journal(
                at: directory.appendingPathComponent("changes.journal"), sharedLevel: "shared",
                polling: .milliseconds(20))
        ) { _, cursor in Self.page(after: cursor) }
    }

    /// Two posts a page, ten in all.
    private static func page(after cursor: Int?) -> AnyLoader<Page<String, Int>> {
        let start = cursor ?? 0
        let items = (start..<min(start + 2, 10)).map { "p\($0)" }
        return AnyLoader { completion in
            completion(.success(Page(items: items, nextCursor: start + 2 < 10 ? start + 2 : nil)))
            return AnyCancellationToken {}
        }
    }

    private func loadNextPage(of key: String, in feed: Feed) -> PagedList<String, Int>? {
        let recorder = LoadRecorder<StoreResponse<PagedList<String, Int>>>()
        _ = recorder.load(feed.nextPage(of: key))
        XCTAssertTrue(eventually { recorder.count == 1 })
        return recorder.values.first?.value
    }
}
