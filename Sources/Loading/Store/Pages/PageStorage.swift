/// The pages of a list's versions, behind a lock (versions on several threads share it), in one order: pages added
/// after the last are at indices from 0 up, pages added before the first at indices from -1 down. Pages are never
/// changed in place: a version changes only by adding a page after its last or before its first, and only when no
/// other version has added one there (then it copies). A version is a window onto these indices.
final class PageStorage<Item: Sendable, Cursor: Sendable>: Sendable {
    typealias LoadedPage = PagedList<Item, Cursor>.LoadedPage

    private struct State: Sendable {
        /// The pages at indices 0, 1, 2...
        var back: [LoadedPage]
        /// The pages at indices -1, -2, -3...
        var front: [LoadedPage] = []
        /// Where each cursor first loaded a page, when cursors are hashable.
        var cursors: [HashableCursor: Int] = [:]
        /// The ids of the items of the pages of `idsWindow`, once asked for (identifiable items), then kept up to
        /// date as pages are added to that window: a `Set` of their id type.
        var ids: (any Sendable)?
        var idsWindow: Range<Int>?

        var bounds: Range<Int> { -front.count..<back.count }

        func page(at index: Int) -> LoadedPage {
            index >= 0 ? back[index] : front[-1 - index]
        }

        /// The pages at `range`, in order. Indexed one by one, not mapped: this code runs unspecialized, where a
        /// collection's generic `map` costs an allocation per element.
        func pages(in range: Range<Int>) -> [LoadedPage] {
            guard range.lowerBound < 0 else { return Array(back[range]) }
            var pages: [LoadedPage] = []
            pages.reserveCapacity(range.count)
            var index = range.lowerBound
            while index < range.upperBound {
                pages.append(page(at: index))
                index += 1
            }
            return pages
        }

        mutating func note(_ cursor: HashableCursor?, at index: Int) {
            guard let cursor, cursors[cursor] == nil else { return }
            cursors[cursor] = index
        }

        /// Leaves out of `page` the items whose id the pages of `window` show, when the ids of that window are
        /// kept, and adds the ids of the items kept; `false`, changing nothing, when they are not kept.
        mutating func dropShown<ID: Hashable & Sendable>(
            from page: inout Page<Item, Cursor>, ids: [ID], window: Range<Int>, grownTo grown: Range<Int>
        ) -> Bool {
            guard idsWindow == window, var shown = self.ids as? Set<ID> else { return false }
            self.ids = nil  // changed in place, not copied
            var kept: [Item] = []
            for (item, id) in zip(page.items, ids) where shown.insert(id).inserted { kept.append(item) }
            page.items = kept
            self.ids = shown
            idsWindow = grown
            return true
        }
    }

    private let state: Locked<State>

    init(_ pages: [LoadedPage]) {
        var state = State(back: pages)
        for (index, page) in pages.enumerated() { state.note(HashableCursor(page.cursor), at: index) }
        self.state = Locked(state)
    }

    func page(at index: Int) -> LoadedPage {
        state.withLock { $0.page(at: index) }
    }

    func pages(in range: Range<Int>) -> [LoadedPage] {
        state.withLock { $0.pages(in: range) }
    }

    /// The cursor of the page after the one at `index` (`before`: of the page before it).
    func cursor(beside index: Int, before: Bool) -> Cursor? {
        state.withLock { state in
            let page = index >= 0 ? state.back[index].page : state.front[-1 - index].page
            return before ? page.previousCursor : page.nextCursor
        }
    }

    /// Whether `cursor` loaded one of the pages before `end`, or is `current` (the cursor the page it comes with was
    /// loaded with, made hashable once by the caller). Only hashable cursors are recognized.
    func isLoaded(_ cursor: Cursor, before end: Int, or current: HashableCursor?) -> Bool {
        isLoaded(cursor, or: current) { $0 < end }
    }

    /// Whether `cursor` loaded one of the pages from `start` on, or is `current`.
    func isLoaded(_ cursor: Cursor, from start: Int, or current: HashableCursor?) -> Bool {
        isLoaded(cursor, or: current) { $0 >= start }
    }

    private func isLoaded(_ cursor: Cursor, or current: HashableCursor?, where placed: (Int) -> Bool) -> Bool {
        guard let cursor = HashableCursor(cursor) else { return false }
        if let current, current == cursor { return true }
        guard let place = state.withLock({ $0.cursors[cursor] }) else { return false }
        return placed(place)
    }

    /// Makes sure the ids of the items of `window` are kept; they are computed outside the lock (`id` reads the
    /// items).
    func prepareIDs<ID: Hashable & Sendable>(of window: Range<Int>, _ id: (Item) -> ID) {
        let pages = state.withLock { state -> [LoadedPage]? in
            guard !(state.ids is Set<ID>) || state.idsWindow != window else { return nil }
            return state.pages(in: window)
        }
        guard let pages else { return }
        let ids = Set(pages.lazy.flatMap { $0.page.items }.map(id))
        state.withLock { state in
            state.ids = ids
            state.idsWindow = window
        }
    }

    /// Adds `page`, loaded with `cursor`, after `window` when that is the end of the storage (the version adding is
    /// the newest there), and returns the window with it and how many pages the storage holds then; `nil` otherwise,
    /// changing nothing. With the ids of the page's items, the items the window shows already are left out.
    func append<ID: Hashable & Sendable>(
        _ page: LoadedPage, loadedWith cursor: HashableCursor?, to window: Range<Int>, ids: [ID]?
    ) -> (window: Range<Int>, held: Int)? {
        state.withLock { state in
            guard state.back.count == window.upperBound else { return nil }
            let grown = window.lowerBound..<(window.upperBound + 1)
            var page = page
            if let ids, !state.dropShown(from: &page.page, ids: ids, window: window, grownTo: grown) { return nil }
            state.back.append(page)
            state.note(cursor, at: window.upperBound)
            return (grown, state.bounds.count)
        }
    }

    /// Adds `page` before `window` when that is the start of the storage, as ``append(_:loadedWith:to:ids:)`` does
    /// after it.
    func prepend<ID: Hashable & Sendable>(
        _ page: LoadedPage, loadedWith cursor: HashableCursor?, to window: Range<Int>, ids: [ID]?
    ) -> (window: Range<Int>, held: Int)? {
        state.withLock { state in
            guard -state.front.count == window.lowerBound else { return nil }
            let grown = (window.lowerBound - 1)..<window.upperBound
            var page = page
            if let ids, !state.dropShown(from: &page.page, ids: ids, window: window, grownTo: grown) { return nil }
            state.front.append(page)
            state.note(cursor, at: grown.lowerBound)
            return (grown, state.bounds.count)
        }
    }
}

/// A cursor as a dictionary key, when its type is hashable (hashed and compared as that type does). Its hash is
/// computed once, as it is made: a lookup that finds no equal cursor looks at the cursor's type no more.
struct HashableCursor: Hashable, Sendable {
    private let cursor: any Sendable
    private let hash: Int

    /// `nil` when there is no cursor, or its type is not hashable.
    init?<Cursor: Sendable>(_ cursor: Cursor?) {
        guard let cursor, let hashable = cursor as? any Hashable else { return nil }
        self.cursor = cursor
        hash = hashable.hashValue
    }

    static func == (lhs: HashableCursor, rhs: HashableCursor) -> Bool {
        guard lhs.hash == rhs.hash, let left = lhs.cursor as? any Hashable else { return false }
        return equals(left, rhs.cursor)
    }

    /// Whether `right` is a value of `left`'s type equal to it.
    private static func equals<Left: Hashable>(_ left: Left, _ right: any Sendable) -> Bool {
        (right as? Left) == left
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
