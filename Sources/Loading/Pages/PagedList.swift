/// The pages of one list loaded so far, in order: the value a ``PagedStore`` keeps per key (and saves to its
/// levels), with its items flattened for a screen.
///
/// ```swift
/// let list = PagedList(firstPage: Page(items: [1, 2], nextCursor: 2))
/// let items = list.items              // [1, 2]
/// let hasMore = list.hasNextPage      // true
/// ```
public struct PagedList<Item: Sendable, Cursor: Sendable>: Sendable {
    /// A page and the cursor it was loaded with (`nil` for the first page of the list).
    public struct LoadedPage: Sendable {
        /// The cursor the page was loaded with; `nil` for the list's first page.
        public let cursor: Cursor?
        /// The page.
        public var page: Page<Item, Cursor>

        /// Creates a loaded page.
        public init(cursor: Cursor?, page: Page<Item, Cursor>) {
            self.cursor = cursor
            self.page = page
        }
    }

    /// The pages, oldest first.
    public private(set) var pages: [LoadedPage]

    /// A list of one page, the first.
    public init(firstPage: Page<Item, Cursor>) {
        pages = [LoadedPage(cursor: nil, page: firstPage)]
    }

    /// A list of these pages (the first loaded with no cursor, unless older pages were dropped).
    public init(pages: [LoadedPage]) {
        self.pages = pages
    }

    /// Every item of every page, in order.
    public var items: [Item] {
        pages.flatMap { $0.page.items }
    }

    /// The cursor of the page after the last one loaded; `nil` when the last page is loaded.
    public var nextCursor: Cursor? {
        pages.last?.page.nextCursor
    }

    /// Whether a page remains to be loaded after the last one.
    public var hasNextPage: Bool {
        nextCursor != nil
    }

    /// Whether the list still holds its first page (a page cap drops the oldest pages).
    public var startsAtFirstPage: Bool {
        pages.first.map { $0.cursor == nil } ?? true
    }

    /// The list with `page`, loaded with `cursor`, after its last page; the oldest pages are dropped to keep at most
    /// `maxPages`.
    public func appending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        var list = self
        list.pages.append(LoadedPage(cursor: cursor, page: page))
        if let maxPages, list.pages.count > max(1, maxPages) {
            list.pages.removeFirst(list.pages.count - max(1, maxPages))
        }
        return list
    }

    /// The list with `transform` applied to the items of the page that holds the item at `index` of ``items``:
    /// the way a live change reaches the right page.
    public func updatingPage(
        holding index: Int, _ transform: (inout [Item]) -> Void
    ) -> PagedList {
        var list = self
        var start = 0
        for pageIndex in list.pages.indices {
            let count = list.pages[pageIndex].page.items.count
            if index < start + count || pageIndex == list.pages.count - 1 {
                transform(&list.pages[pageIndex].page.items)
                return list
            }
            start += count
        }
        return list
    }
}

extension PagedList where Item: Identifiable {
    /// The list with `item` in place of the item with its id, in the page that holds it; unchanged when no page
    /// holds it.
    public func replacing(_ item: Item) -> PagedList {
        guard let index = items.firstIndex(where: { $0.id == item.id }) else { return self }
        return updatingPage(holding: index) { items in
            if let position = items.firstIndex(where: { $0.id == item.id }) { items[position] = item }
        }
    }

    /// The list without the item whose id is `id`, in the page that held it.
    public func removing(id: Item.ID) -> PagedList {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return self }
        return updatingPage(holding: index) { items in items.removeAll { $0.id == id } }
    }

    /// The list with `item` first in its first page, when it holds the list's first page (a new item at the top of
    /// a feed); unchanged otherwise, or when it already holds the item (then it is replaced in place).
    public func inserting(_ item: Item) -> PagedList {
        guard !items.contains(where: { $0.id == item.id }) else { return replacing(item) }
        guard startsAtFirstPage, !pages.isEmpty else { return self }
        var list = self
        list.pages[0].page.items.insert(item, at: 0)
        return list
    }
}

extension PagedList.LoadedPage: Equatable where Item: Equatable, Cursor: Equatable {}
extension PagedList.LoadedPage: Codable where Item: Codable, Cursor: Codable {}
extension PagedList: Equatable where Item: Equatable, Cursor: Equatable {}
extension PagedList: Codable where Item: Codable, Cursor: Codable {}
