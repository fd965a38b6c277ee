/// The store a paged store's fetch reads: set once, after the store is made (weak: the store owns its fetch).
final class StoreLink<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Reference: Sendable {
        weak var store: Store<Key, Value>?
    }

    private let reference = Locked(Reference())

    func set(_ store: Store<Key, Value>) {
        reference.withLock { $0.store = store }
    }

    var store: Store<Key, Value>? {
        reference.withLock { $0.store }
    }
}

/// The fetch of a paged store: the list's first page when there is no list, else its loaded pages again, in order,
/// until one is unchanged (see ``PagedStore``).
struct PageRefresh<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>: Loader {
    let key: Key
    let link: StoreLink<Key, PagedList<Item, Cursor>>
    let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>

    func load(completion: @escaping LoadCompletion<PagedList<Item, Cursor>>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        guard let store = link.store else {
            pending.complete(.failure(CancellationError()))
            return pending
        }
        pending.startStep {
            // What the store shows, stale or not: the pages to load again.
            store.read(key, policy: .cacheOnly).load { [key, page] shown in
                let old = (try? shown.get())?.value?.pages ?? []
                PageWalk(key: key, old: old, page: page, pending: pending).start()
            }
        }
        return pending
    }
}

/// Loads a list's pages again one after another, in constant stack depth, and completes `pending` with the list.
final class PageWalk<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>: Sendable {
    private typealias Loaded = PagedList<Item, Cursor>.LoadedPage

    private let key: Key
    private let old: [Loaded]
    private let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>
    private let pending: PendingLoad<PagedList<Item, Cursor>>
    private let fresh = Locked<[Loaded]>([])
    private let trampoline = Trampoline()

    init(
        key: Key, old: [PagedList<Item, Cursor>.LoadedPage],
        page: @escaping @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>,
        pending: PendingLoad<PagedList<Item, Cursor>>
    ) {
        self.key = key
        self.old = old
        self.page = page
        self.pending = pending
    }

    func start() {
        load(old.first?.cursor)
    }

    /// Loads the page at `cursor`; a page answered at once is handled by the running loop, not nested in it.
    private func load(_ cursor: Cursor?) {
        trampoline.run { [self] in
            pending.startStep {
                page(key, cursor).load { [self] result in
                    switch result {
                    case .failure(let error): pending.complete(.failure(error))
                    case .success(let loaded): received(loaded, loadedWith: cursor)
                    }
                }
            }
        }
    }

    private func received(_ loaded: Page<Item, Cursor>, loadedWith cursor: Cursor?) {
        let (pages, next) = fresh.withLock { fresh -> ([Loaded]?, Cursor?) in
            let index = fresh.count
            // The first page equal to the one it stands for ends the walk: the pages after it are kept. In a list
            // that grew backward, the walk reaches the pages after the first by their next cursors, not by the
            // cursors they were loaded with: the page alone is compared.
            let grewBackward = old.first?.isPrevious == true
            if index < old.count, old[index].page == loaded, grewBackward || old[index].cursor == cursor {
                return (fresh + old[index...], nil)
            }
            // The first page keeps how it was loaded (a list's first page loaded backward starts it).
            fresh.append(Loaded(cursor: cursor, page: loaded, isPrevious: index == 0 && grewBackward))
            guard let next = loaded.nextCursor, fresh.count < old.count else { return (fresh, nil) }
            return (nil, next)
        }
        if let pages { return pending.complete(.success(PagedList(pages: pages))) }
        load(next)
    }
}
