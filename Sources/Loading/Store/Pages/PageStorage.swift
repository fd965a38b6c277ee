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

        /// Whether a page whose cursor on the side it is added to is `onward` ends the list there: that cursor
        /// loaded one of the pages on that side of the end being added to (any page before `window`'s end when
        /// appending, from its start on when prepending), or is `loadedWith`, the cursor the page was loaded with.
        func ends(at onward: HashableCursor?, loadedWith: HashableCursor?, before: Bool, window: Range<Int>) -> Bool {
            guard let onward else { return false }
            if let loadedWith, loadedWith == onward { return true }
            guard let place = cursors[onward] else { return false }
            return before ? place >= window.lowerBound : place < window.upperBound
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

    /// `page`, to be added after `window` (`before`: before it), without its cursor on that side when the page ends
    /// the list there (see ``add(_:loadedWith:onward:before:to:ids:)``): for a version that copies its pages.
    func ending(
        _ page: LoadedPage, loadedWith: HashableCursor?, onward: HashableCursor?, before: Bool, window: Range<Int>
    ) -> LoadedPage {
        guard state.withLock({ $0.ends(at: onward, loadedWith: loadedWith, before: before, window: window) }) else {
            return page
        }
        var page = page
        Self.end(&page, before: before)
        return page
    }

    /// Drops `page`'s cursor on the side it is added to (`before`: its previous cursor): the list ends there.
    private static func end(_ page: inout LoadedPage, before: Bool) {
        if before { page.page.previousCursor = nil } else { page.page.nextCursor = nil }
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

    /// Adds `page` after `window` (`before`: before it) when that end of the window is the storage's end there (the
    /// version adding is the newest there), and returns the window with it and how many pages the storage holds
    /// then; `nil` otherwise, changing nothing. One step under the lock: no other version adds a page between the
    /// check and the add.
    ///
    /// `loadedWith` is the cursor the page was loaded with and `onward` its cursor on the side it is added to, both
    /// made hashable by the caller (outside the lock: hashing runs the cursor type's code). A page whose onward cursor
    /// loaded a page already, or is the cursor it was loaded with, ends the list: that cursor is dropped from it. With
    /// the ids of the page's items, the items the window shows already are left out.
    func add<ID: Hashable & Sendable>(
        _ page: LoadedPage, loadedWith: HashableCursor?, onward: HashableCursor?, before: Bool, to window: Range<Int>,
        ids: [ID]?
    ) -> (window: Range<Int>, held: Int)? {
        state.withLock { state in
            let grown: Range<Int>
            if before {
                guard -state.front.count == window.lowerBound else { return nil }
                grown = (window.lowerBound - 1)..<window.upperBound
            } else {
                guard state.back.count == window.upperBound else { return nil }
                grown = window.lowerBound..<(window.upperBound + 1)
            }
            var page = page
            if state.ends(at: onward, loadedWith: loadedWith, before: before, window: window) {
                Self.end(&page, before: before)
            }
            if let ids, !state.dropShown(from: &page.page, ids: ids, window: window, grownTo: grown) { return nil }
            if before { state.front.append(page) } else { state.back.append(page) }
            state.note(loadedWith, at: before ? grown.lowerBound : window.upperBound)
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
