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
        /// date as that window moves (a page added at one end, pages a cap drops at the other): how many items of
        /// the window have each id. Ids are kept as ``ItemID``, so that this code, compiled once and run
        /// unspecialized, works on a dictionary of one known type.
        var ids: [ItemID: Int]?
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

        /// Leaves out of `page` the items whose id the pages that stay show: the pages of `window`, when their ids
        /// are kept, but those a cap drops as the page is added (`dropped`: the ids of their items). Then the ids
        /// kept are those of `kept`, the window with the page and without those pages. `false`, changing nothing,
        /// when the ids of `window` are not kept.
        mutating func dropShown(
            from page: inout Page<Item, Cursor>, ids: [ItemID], window: Range<Int>, dropped: [ItemID],
            keeping kept: Range<Int>
        ) -> Bool {
            guard idsWindow == window, var shown = self.ids else { return false }
            self.ids = nil  // changed in place, not copied
            for id in dropped {
                guard let count = shown[id] else { continue }
                shown[id] = count > 1 ? count - 1 : nil
            }
            // The positions of the items kept: the page's items are copied only when some are left out.
            var positions: [Int] = []
            positions.reserveCapacity(ids.count)
            for index in ids.indices where shown[ids[index]] == nil {
                shown[ids[index]] = 1
                positions.append(index)
            }
            if positions.count < page.items.count { page.items = positions.map { page.items[$0] } }
            self.ids = shown
            idsWindow = kept
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
    /// items). A window the storage keeps them for already costs nothing: a list that grows (and drops pages at the
    /// other end) keeps them in step, so only a list made anew counts them all.
    private func prepareIDs(of window: Range<Int>, _ id: (Item) -> ItemID) {
        let pages = state.withLock { state -> [LoadedPage]? in
            guard state.ids == nil || state.idsWindow != window else { return nil }
            return state.pages(in: window)
        }
        guard let pages else { return }
        var ids: [ItemID: Int] = [:]
        for page in pages {
            for item in page.page.items { ids[id(item), default: 0] += 1 }
        }
        state.withLock { state in
            state.ids = ids
            state.idsWindow = window
        }
    }

    /// The ids that adding `page` to `window` needs (see ``add(_:loadedWith:onward:before:to:ids:)``): its items',
    /// and those of the items of the pages at `dropped`, which a cap drops as it is added; the ids of `window` are
    /// made sure to be kept first.
    func ids<ID: Hashable & Sendable>(
        adding page: Page<Item, Cursor>, to window: Range<Int>, dropping dropped: Range<Int>, _ id: (Item) -> ID
    ) -> (page: [ItemID], dropped: [ItemID]) {
        prepareIDs(of: window) { ItemID(id($0)) }
        var pageIDs: [ItemID] = []
        pageIDs.reserveCapacity(page.items.count)
        for item in page.items { pageIDs.append(ItemID(id(item))) }
        return (pageIDs, ids(in: dropped) { ItemID(id($0)) })
    }

    /// The ids of the items of the pages at `range` (read under the lock, the ids computed after it).
    func ids(in range: Range<Int>, _ id: (Item) -> ItemID) -> [ItemID] {
        guard !range.isEmpty else { return [] }
        var ids: [ItemID] = []
        for page in pages(in: range) {
            for item in page.page.items { ids.append(id(item)) }
        }
        return ids
    }

    /// Adds `page` after `window` (`before`: before it) when that end of the window is the storage's end there (the
    /// version adding is the newest there), and returns the window with it and how many pages the storage holds
    /// then; `nil` otherwise, changing nothing. One step under the lock: no other version adds a page between the
    /// check and the add.
    ///
    /// `loadedWith` is the cursor the page was loaded with and `onward` its cursor on the side it is added to, both
    /// made hashable by the caller (outside the lock: hashing runs the cursor type's code). A page whose onward cursor
    /// loaded a page already, or is the cursor it was loaded with, ends the list: that cursor is dropped from it. With
    /// the ids of the page's items, the items the window shows already are left out; `dropped` are the ids of the
    /// items of the pages a cap drops at the other end, and `kept` the window once they are dropped: the ids kept
    /// follow it.
    func add(
        _ page: LoadedPage, loadedWith: HashableCursor?, onward: HashableCursor?, before: Bool, to window: Range<Int>,
        ids: (page: [ItemID], dropped: [ItemID], kept: Int)?
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
            if let ids {
                let kept = grown.keeping(ids.kept, before: before)
                guard
                    state.dropShown(
                        from: &page.page, ids: ids.page, window: window, dropped: ids.dropped, keeping: kept)
                else { return nil }
            }
            if before { state.front.append(page) } else { state.back.append(page) }
            state.note(loadedWith, at: before ? grown.lowerBound : window.upperBound)
            return (grown, state.bounds.count)
        }
    }
}

extension Range<Int> {
    /// The pages of a list's window a cap of `count` keeps: the `count` from the end a page was added to (`before`:
    /// its start). Not a member of the generic storage: a call there would look up the storage type's metadata.
    func keeping(_ count: Int, before: Bool) -> Range<Int> {
        guard self.count > count else { return self }
        return before ? lowerBound..<(lowerBound + count) : (upperBound - count)..<upperBound
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

/// An item's id, of whatever type the items have: hashed once, as it is made, and compared as that type does. The
/// pages' code keeps ids in dictionaries of this one type, compiled once: a dictionary of the id type itself, in code
/// that runs unspecialized, looks up the metadata of its parts at every use.
struct ItemID: Hashable, Sendable {
    private let id: any Hashable & Sendable
    private let hash: Int

    init<ID: Hashable & Sendable>(_ id: ID) {
        self.id = id
        hash = id.hashValue
    }

    static func == (lhs: ItemID, rhs: ItemID) -> Bool {
        lhs.hash == rhs.hash && equals(lhs.id, rhs.id)
    }

    /// Whether `right` is a value of `left`'s type equal to it.
    private static func equals<Left: Hashable>(_ left: Left, _ right: any Hashable & Sendable) -> Bool {
        // The type compared first: a cast to an optional looks up the optional type's metadata.
        guard type(of: right) == Left.self else { return false }
        return right as! Left == left
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
