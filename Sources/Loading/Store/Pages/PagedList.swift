/// The pages of one list loaded so far, in order: the value a ``PagedStore`` keeps per key (and saves to its
/// levels), with its items flattened for a screen.
///
/// ```swift
/// let list = PagedList(firstPage: Page(items: [1, 2], nextCursor: 2))
/// let items = list.items              // [1, 2]
/// let hasMore = list.hasNextPage      // true
/// ```
///
/// - **Appending is O(1)** (amortized): a list is a window onto page storage that its versions share, and a page
///   appended to the newest version is added in place; an older version appended to copies its pages first.
/// - **A cursor that repeats ends the list**: a page whose next cursor was already used to load a page of the list
///   (a server answering every page with the same cursor, or cycling) is appended without a next cursor, so that
///   ``hasNextPage`` is `false` and loading more stops.
/// - **An item shown twice** (offset paging after an insert at the top): when the items are `Identifiable`,
///   appending a page drops from it the items whose id the list already shows, and
///   ``replacing(_:)`` and ``removing(id:)`` reach every copy of an item.
public struct PagedList<Item: Sendable, Cursor: Sendable>: Sendable {
    /// A page and the cursor it was loaded with (`nil` for the first page of the list).
    public struct LoadedPage: Sendable {
        /// The cursor the page was loaded with; `nil` for the list's first page.
        public let cursor: Cursor?
        /// The page.
        public var page: Page<Item, Cursor>
        /// Whether the page was loaded as the previous page of the one after it (a list growing backward).
        let isPrevious: Bool

        /// Creates a loaded page.
        init(cursor: Cursor?, page: Page<Item, Cursor>) {
            self.init(cursor: cursor, page: page, isPrevious: false)
        }

        init(cursor: Cursor?, page: Page<Item, Cursor>, isPrevious: Bool) {
            self.cursor = cursor
            self.page = page
            self.isPrevious = isPrevious
        }
    }

    /// Where the pages are: shared by the versions of the list that grew from one another.
    private var storage: PageStorage<Item, Cursor>
    /// The pages of this version in `storage`.
    private var window: Range<Int>

    /// A list of one page, the first.
    public init(firstPage: Page<Item, Cursor>) {
        self.init(pages: [LoadedPage(cursor: nil, page: firstPage)])
    }

    /// A list of these pages (the first loaded with no cursor, unless older pages were dropped).
    init(pages: [LoadedPage]) {
        storage = PageStorage(pages)
        window = 0..<pages.count
    }

    /// The pages, oldest first.
    ///
    /// - Complexity: O(pages): it builds the array.
    public var pages: [LoadedPage] {
        storage.pages(in: window)
    }

    /// Every item of every page, in order.
    ///
    /// - Complexity: O(items).
    public var items: [Item] {
        pages.flatMap { $0.page.items }
    }

    /// The last page, if any.
    var lastPage: LoadedPage? {
        window.isEmpty ? nil : storage.page(at: window.upperBound - 1)
    }

    /// The first page, if any.
    var firstPage: LoadedPage? {
        window.isEmpty ? nil : storage.page(at: window.lowerBound)
    }

    /// Whether `other` ends with the same page as this list on one side (its first page when `before`, else its
    /// last). Two versions of one storage ending at the same index end with the same page (a storage's pages never
    /// change: a changed list gets a storage of its own), which is answered without reading it; other lists compare
    /// their pages.
    func hasSameEnd(as other: PagedList, before: Bool) -> Bool where Item: Equatable, Cursor: Equatable {
        let (end, otherEnd) =
            before ? (window.lowerBound, other.window.lowerBound) : (window.upperBound, other.window.upperBound)
        if storage === other.storage, end == otherEnd, window.isEmpty == other.window.isEmpty { return true }
        return before ? firstPage == other.firstPage : lastPage == other.lastPage
    }

    /// The cursor of the page after the last one loaded; `nil` when the last page is loaded.
    var nextCursor: Cursor? {
        window.isEmpty ? nil : storage.cursor(beside: window.upperBound - 1, before: false)
    }

    /// Whether a page remains to be loaded after the last one.
    public var hasNextPage: Bool {
        nextCursor != nil
    }

    /// The cursor of the page before the first one loaded; `nil` when the list starts at its first page (or its
    /// source has no previous pages).
    var previousCursor: Cursor? {
        window.isEmpty ? nil : storage.cursor(beside: window.lowerBound, before: true)
    }

    /// Whether a page remains to be loaded before the first one (a list opened in the middle: a chat, a timeline).
    public var hasPreviousPage: Bool {
        previousCursor != nil
    }

    /// Whether the list holds its first page: its first page has no previous page, and was not left behind when a
    /// page cap dropped the pages before it.
    public var startsAtFirstPage: Bool {
        guard let first = firstPage else { return true }
        return first.page.previousCursor == nil && (first.cursor == nil || first.isPrevious)
    }

    /// The list with `page`, loaded with `cursor`, after its last page; the oldest pages are dropped to keep at most
    /// `maxPages`. A page whose next cursor was loaded already ends the list (see ``PagedList``).
    ///
    /// - Complexity: O(1) amortized when the list is the newest version of its pages; O(pages) otherwise.
    public func appending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        adding(page, loadedWith: cursor, before: false, maxPages: maxPages, id: nil as (@Sendable (Item) -> Int)?)
    }

    /// The list with `page`, loaded with `cursor` (the previous cursor of its first page), before its first page; the pages
    /// at the other end are dropped to keep at most `maxPages`. A page whose previous cursor was loaded already
    /// starts the list.
    ///
    /// - Complexity: O(1) amortized when the list is the newest version of its pages; O(pages) otherwise.
    public func prepending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        adding(page, loadedWith: cursor, before: true, maxPages: maxPages, id: nil as (@Sendable (Item) -> Int)?)
    }

    /// The list with `page` after its last page or `before` its first, dropping from `page` the items whose id
    /// (`id`) the list shows already (in the pages that stay), and pages from the other end beyond `maxPages`.
    func adding<ID: Hashable & Sendable>(
        _ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, before: Bool, maxPages: Int?,
        id: (@Sendable (Item) -> ID)?
    ) -> PagedList {
        var list = self
        let loadedWith = HashableCursor(cursor)
        let onward = HashableCursor(before ? page.previousCursor : page.nextCursor)
        let kept = maxPages.map { max(1, $0) } ?? .max
        // The pages a cap drops at the other end once the page is added.
        let (lower, upper) = (window.lowerBound, window.upperBound)
        let stays = (before ? (lower - 1)..<upper : lower..<(upper + 1)).keeping(kept, before: before)
        let dropped = before ? max(lower, stays.upperBound)..<upper : lower..<min(upper, stays.lowerBound)
        // The ids of the page's items, and of those of the dropped pages, computed here, outside the storage's lock
        // (an id is the items' code).
        var ids: (page: [ItemID], dropped: [ItemID], kept: Int)?
        if let id {
            let (pageIDs, droppedIDs) = list.storage.ids(adding: page, to: window, dropping: dropped, id)
            ids = (pageIDs, droppedIDs, kept)
        }
        let loaded = LoadedPage(cursor: cursor, page: page, isPrevious: before)
        // How many pages the list's storage holds, its dropped ones and those of other versions too.
        var held: Int
        if let added = list.storage.add(
            loaded, loadedWith: loadedWith, onward: onward, before: before, to: window, ids: ids)
        {
            (list.window, held) = added
        } else {
            // An older version: its pages are copied, and the new one added to them.
            var loaded = list.storage.ending(
                loaded, loadedWith: loadedWith, onward: onward, before: before, window: window)
            if let id, let pageIDs = ids?.page {
                let staying = before ? lower..<dropped.lowerBound : dropped.upperBound..<upper
                // An id the page shows twice is kept once, as the newest version keeps it.
                var shown = Set(list.storage.ids(in: staying) { ItemID(id($0)) })
                loaded.page.items = pageIDs.indices.filter { shown.insert(pageIDs[$0]).inserted }.map { page.items[$0] }
            }
            list = PagedList(pages: before ? [loaded] + list.pages : list.pages + [loaded])
            held = list.window.count
        }
        list.window = list.window.keeping(kept, before: before)
        // Dropped pages (and those of other versions) are let go once they are the larger part of the storage.
        if held - list.window.count > 32, (held - list.window.count) * 2 > held {
            list = PagedList(pages: list.pages)
        }
        return list
    }

    /// The list with `transform` applied to the items of the page that holds the item at `index` of ``items``:
    /// the way a live change reaches the right page.
    func updatingPage(
        holding index: Int, _ transform: (inout [Item]) -> Void
    ) -> PagedList {
        var pages = pages
        var start = 0
        for pageIndex in pages.indices {
            let count = pages[pageIndex].page.items.count
            if index < start + count || pageIndex == pages.count - 1 {
                transform(&pages[pageIndex].page.items)
                return PagedList(pages: pages)
            }
            start += count
        }
        return self
    }

    /// The list with `transform` applied to the items of every page.
    func updatingEveryPage(_ transform: (inout [Item]) -> Void) -> PagedList {
        var pages = pages
        for index in pages.indices { transform(&pages[index].page.items) }
        return PagedList(pages: pages)
    }
}

extension PagedList where Item: Identifiable {
    /// The list with `item` in place of every item with its id, in the pages that hold them; unchanged when no page
    /// holds it.
    public func replacing(_ item: Item) -> PagedList {
        guard items.contains(where: { $0.id == item.id }) else { return self }
        return updatingEveryPage { items in
            for position in items.indices where items[position].id == item.id { items[position] = item }
        }
    }

    /// The list without the items whose id is `id`, in every page that held one.
    public func removing(id: Item.ID) -> PagedList {
        guard items.contains(where: { $0.id == id }) else { return self }
        return updatingEveryPage { items in items.removeAll { $0.id == id } }
    }

    /// The list with `item` first in its first page, when it holds the list's first page (a new item at the top of
    /// a feed); unchanged otherwise, or when it already holds the item (then it is replaced in place).
    public func inserting(_ item: Item) -> PagedList {
        guard !items.contains(where: { $0.id == item.id }) else { return replacing(item) }
        guard startsAtFirstPage, !pages.isEmpty else { return self }
        var pages = pages
        pages[0].page.items.insert(item, at: 0)
        return PagedList(pages: pages)
    }

}

extension PagedList where Item: Identifiable, Item.ID: Sendable {
    /// The list with `page`, loaded with `cursor`, after its last page, without the items of `page` the list shows
    /// already (offset paging shows an item twice after an insert at the top); the oldest pages are dropped to keep
    /// at most `maxPages`, and an item only they showed is kept in `page`. A page whose next cursor was loaded
    /// already ends the list.
    ///
    /// - Complexity: O(items of `page` and of the pages dropped) amortized when the list is the newest version of
    ///   its pages.
    public func appending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        adding(page, loadedWith: cursor, before: false, maxPages: maxPages, id: { $0.id })
    }

    /// The list with `page`, loaded with `cursor`, before its first page, without the items of `page` the list shows
    /// already; the pages at the other end are dropped to keep at most `maxPages`, and an item only they showed is
    /// kept in `page`.
    ///
    /// - Complexity: O(items of `page` and of the pages dropped) amortized when the list is the newest version of
    ///   its pages.
    public func prepending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        adding(page, loadedWith: cursor, before: true, maxPages: maxPages, id: { $0.id })
    }
}

extension PagedList: Equatable where Item: Equatable, Cursor: Equatable {
    public static func == (lhs: PagedList, rhs: PagedList) -> Bool {
        if lhs.storage === rhs.storage, lhs.window == rhs.window { return true }
        return lhs.pages == rhs.pages
    }
}

extension PagedList: Codable where Item: Codable, Cursor: Codable {
    private enum CodingKeys: String, CodingKey {
        case pages
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(pages: try container.decode([LoadedPage].self, forKey: .pages))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pages, forKey: .pages)
    }
}

extension PagedList.LoadedPage: Equatable where Item: Equatable, Cursor: Equatable {}

extension PagedList.LoadedPage: Codable where Item: Codable, Cursor: Codable {
    private enum CodingKeys: String, CodingKey {
        case cursor, page, isPrevious
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            cursor: try container.decodeIfPresent(Cursor.self, forKey: .cursor),
            page: try container.decode(Page<Item, Cursor>.self, forKey: .page),
            isPrevious: try container.decodeIfPresent(Bool.self, forKey: .isPrevious) ?? false)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(cursor, forKey: .cursor)
        try container.encode(page, forKey: .page)
        if isPrevious { try container.encode(true, forKey: .isPrevious) }
    }
}
