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

        /// Creates a loaded page.
        public init(cursor: Cursor?, page: Page<Item, Cursor>) {
            self.cursor = cursor
            self.page = page
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
    public init(pages: [LoadedPage]) {
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
    public var lastPage: LoadedPage? {
        window.isEmpty ? nil : storage.page(at: window.upperBound - 1)
    }

    /// The cursor of the page after the last one loaded; `nil` when the last page is loaded.
    public var nextCursor: Cursor? {
        lastPage?.page.nextCursor
    }

    /// Whether a page remains to be loaded after the last one.
    public var hasNextPage: Bool {
        nextCursor != nil
    }

    /// Whether the list still holds its first page (a page cap drops the oldest pages).
    public var startsAtFirstPage: Bool {
        window.isEmpty || storage.page(at: window.lowerBound).cursor == nil
    }

    /// The list with `page`, loaded with `cursor`, after its last page; the oldest pages are dropped to keep at most
    /// `maxPages`. A page whose next cursor was loaded already ends the list (see ``PagedList``).
    ///
    /// - Complexity: O(1) amortized when the list is the newest version of its pages; O(pages) otherwise.
    public func appending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        appending(page, loadedWith: cursor, maxPages: maxPages, id: nil as (@Sendable (Item) -> Int)?)
    }

    /// ``appending(_:loadedWith:maxPages:)``, dropping from `page` the items whose id (`id`) the list shows already.
    func appending<ID: Hashable & Sendable>(
        _ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int?, id: (@Sendable (Item) -> ID)?
    ) -> PagedList {
        var list = self
        var page = page
        if let next = page.nextCursor, list.storage.isLoaded(next, before: list.window.upperBound, or: cursor) {
            page.nextCursor = nil
        }
        let pageIDs = id.map { page.items.map($0) }
        if let id { list.storage.prepareIDs(of: list.window, id) }
        if let added = list.storage.append(page, loadedWith: cursor, to: list.window, ids: pageIDs) {
            list.window = list.window.lowerBound..<added
        } else {
            // An older version: its pages are copied, and the new one added after them.
            if let id, let pageIDs {
                let shown = Set(list.items.map(id))
                page.items = zip(page.items, pageIDs).filter { !shown.contains($0.1) }.map(\.0)
            }
            list = PagedList(pages: list.pages + [LoadedPage(cursor: cursor, page: page)])
        }
        if let maxPages, list.window.count > max(1, maxPages) {
            list.window = (list.window.upperBound - max(1, maxPages))..<list.window.upperBound
        }
        // Dropped pages are let go once they are the larger part of the storage.
        if list.window.lowerBound > 32, list.window.lowerBound * 2 > list.window.upperBound {
            list = PagedList(pages: list.pages)
        }
        return list
    }

    /// The list with `transform` applied to the items of the page that holds the item at `index` of ``items``:
    /// the way a live change reaches the right page.
    public func updatingPage(
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
    /// at most `maxPages`. A page whose next cursor was loaded already ends the list.
    ///
    /// - Complexity: O(items of `page`) amortized when the list is the newest version of its pages.
    public func appending(_ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, maxPages: Int? = nil) -> PagedList {
        appending(page, loadedWith: cursor, maxPages: maxPages, id: { $0.id })
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
extension PagedList.LoadedPage: Codable where Item: Codable, Cursor: Codable {}

/// The pages of a list's versions, in the order they were appended, behind a lock (versions on several threads share
/// it). Pages are never changed in place: a version changes only by adding pages after its last, and only when no
/// other version has (then it copies).
final class PageStorage<Item: Sendable, Cursor: Sendable>: Sendable {
    private struct State: Sendable {
        var pages: [PagedList<Item, Cursor>.LoadedPage]
        /// Where each cursor first loaded a page, when cursors are hashable.
        var cursors: [HashableCursor<Cursor>: Int] = [:]
        /// The ids of the items of the pages from `idsStart` to the end, once asked for (identifiable items), then
        /// kept up to date as pages are appended: a `Set` of their id type.
        var ids: (any Sendable)?
        var idsStart = 0

        mutating func note(_ cursor: Cursor?, at index: Int) {
            guard let cursor = HashableCursor(cursor), cursors[cursor] == nil else { return }
            cursors[cursor] = index
        }
    }

    private let state: Locked<State>

    init(_ pages: [PagedList<Item, Cursor>.LoadedPage]) {
        var state = State(pages: pages)
        for (index, page) in pages.enumerated() { state.note(page.cursor, at: index) }
        self.state = Locked(state)
    }

    func page(at index: Int) -> PagedList<Item, Cursor>.LoadedPage {
        state.withLock { $0.pages[index] }
    }

    func pages(in range: Range<Int>) -> [PagedList<Item, Cursor>.LoadedPage] {
        state.withLock { Array($0.pages[range]) }
    }

    /// Whether `cursor` loaded one of the pages before `end`, or is `current` (the cursor the page it comes with was
    /// loaded with). Only hashable cursors are recognized.
    func isLoaded(_ cursor: Cursor, before end: Int, or current: Cursor?) -> Bool {
        guard let cursor = HashableCursor(cursor) else { return false }
        if let current = HashableCursor(current), current == cursor { return true }
        return state.withLock { $0.cursors[cursor] }.map { $0 < end } ?? false
    }

    /// Makes sure the ids of the items of `window` are kept, when it reaches the end of the storage (the newest
    /// version); they are computed outside the lock (`id` reads the items).
    func prepareIDs<ID: Hashable & Sendable>(of window: Range<Int>, _ id: (Item) -> ID) {
        let pages = state.withLock { state -> [PagedList<Item, Cursor>.LoadedPage]? in
            guard window.upperBound == state.pages.count, !(state.ids is Set<ID>) || state.idsStart != window.lowerBound
            else { return nil }
            return Array(state.pages[window])
        }
        guard let pages else { return }
        let ids = Set(pages.lazy.flatMap { $0.page.items }.map(id))
        state.withLock { state in
            guard window.upperBound == state.pages.count else { return }
            state.ids = ids
            state.idsStart = window.lowerBound
        }
    }

    /// Adds `page`, loaded with `cursor`, after `window` when that is the end of the storage (the version appending
    /// is the newest), and returns the new end; `nil` otherwise, changing nothing. With the ids of the page's items,
    /// the items the window shows already are left out.
    func append<ID: Hashable & Sendable>(
        _ page: Page<Item, Cursor>, loadedWith cursor: Cursor?, to window: Range<Int>, ids: [ID]?
    ) -> Int? {
        state.withLock { state in
            guard state.pages.count == window.upperBound else { return nil }
            var page = page
            if let ids {
                guard state.idsStart == window.lowerBound, var shown = state.ids as? Set<ID> else { return nil }
                state.ids = nil  // changed in place, not copied
                var kept: [Item] = []
                for (item, id) in zip(page.items, ids) where shown.insert(id).inserted { kept.append(item) }
                page.items = kept
                state.ids = shown
            }
            state.pages.append(PagedList.LoadedPage(cursor: cursor, page: page))
            state.note(cursor, at: window.upperBound)
            return state.pages.count
        }
    }
}

/// A cursor as a dictionary key, when its type is hashable (it is hashed and compared as `AnyHashable` does).
struct HashableCursor<Cursor: Sendable>: Hashable, Sendable {
    private let cursor: Cursor

    /// `nil` when there is no cursor, or its type is not hashable.
    init?(_ cursor: Cursor?) {
        guard let cursor, cursor is any Hashable else { return nil }
        self.cursor = cursor
    }

    private var hashable: AnyHashable? {
        guard let base = cursor as? any Hashable else { return nil }
        return Self.erase(base)
    }

    private static func erase<Base: Hashable>(_ base: Base) -> AnyHashable {
        AnyHashable(base)
    }

    static func == (lhs: HashableCursor, rhs: HashableCursor) -> Bool {
        lhs.hashable == rhs.hashable
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hashable)
    }
}
