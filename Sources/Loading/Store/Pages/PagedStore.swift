#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Lists that grow a page at a time, per key (a feed, search results, the friends of a user): the pages loaded so
/// far accumulate into one ``PagedList`` per key, kept by a ``Store`` and saved to its levels.
///
/// ```swift
/// let feeds = PagedStore(levels: [.cache(MemoryCache<String, PagedList<Post, Int>>(), name: "memory")],
///                        maxPages: 10) { (feed: String, cursor: Int?) in
///     api.posts(in: feed, after: cursor)            // any Loader of Page<Post, Int>
/// }
/// feeds.loadNextPage(of: "home") { result in show(result) }       // the first page, then each next one
/// feeds.store.refresh("home") { _ in }                            // revalidates the loaded pages
/// feeds.store.update("home") { $0?.replacing(editedPost) }        // a live change, in the page that holds it
/// ```
///
/// - **Loading more**: ``loadNextPage(of:completion:)`` loads the first page when the key has no list (in the store
///   or its levels), else the page after the last one, appends it and saves the list at once
///   (``nextPage(of:)`` is the same as a loader, to compose). Concurrent calls for a key share one request (and
///   its answer); a caller's cancel drops its interest alone, and the last one's cancels the request. A page that
///   arrives after the list's last page changed (a refresh, a live change of that page) is dropped: an offset may
///   point elsewhere now; ask again. With no list, the call is a cache-first read of the store, which joins a
///   refresh of the key in flight.
/// - **Repeats**: a page whose next cursor was loaded already ends the list; with `Identifiable` items, a page's
///   items the list shows already are dropped from it (see ``PagedList``).
/// - **A page cap**: with `maxPages`, appending drops the oldest pages; the list then starts at a later page
///   (``PagedList/startsAtFirstPage`` is `false`), and a refresh starts from there.
/// - **Refreshing** (the store's fetch: ``Store/refresh(_:)``, an invalidation, a revalidation, a read that finds
///   the list stale) loads the loaded pages again, in order, from the list's first cursor. Each fresh page replaces
///   the page it stands for; at the **first fresh page equal to the one it replaces, the refresh stops** and keeps
///   the pages after it as they are (nothing changed above them). Otherwise it goes on with the fresh page's next
///   cursor until it has loaded as many pages as the list had (or the source says there are no more: the list then
///   ends there). A page that fails fails the refresh, and the list stays as it was. Pages appended and live
///   changes made while it runs are applied again to the pages it brings, so a refresh never undoes them (a page
///   appended, only when the refreshed list still ends with the page it followed).
/// - Live changes go through the store (``Store/update(_:_:)``) with the list's helpers (``PagedList/replacing(_:)``,
///   ``PagedList/removing(id:)``, ``PagedList/inserting(_:)``), in order with every other change of the key.
public final class PagedStore<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>:
    Sendable
{
    /// The store of the lists: observe it, read it, invalidate it, or show a key with a ``ResourceModel``.
    public let store: Store<Key, PagedList<Item, Cursor>>
    private let nextPages: LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>

    private init(
        made: (Store<Key, PagedList<Item, Cursor>>, LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>)
    ) {
        (store, nextPages) = made
    }

    /// Creates a store of paged lists.
    /// - Parameters:
    ///   - levels: the caches of the lists, fastest first (see ``Store``).
    ///   - maxPages: how many pages a list keeps at most (the oldest are dropped); `nil` for no limit.
    ///   - maxAge: how long a list stays fresh for cache-first reads (see ``Store``).
    ///   - network: what loads do while the network cannot be reached.
    ///   - now: the clock lists are stamped with.
    ///   - onWriteFailure: told of every failed level write.
    ///   - page: the page of a key's list that a cursor points to (`nil`: the first page).
    public init<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>],
        maxPages: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader
    ) where PageLoader.Output == Page<Item, Cursor> {
        (store, nextPages) = Self.make(
            levels: levels, maxAge: maxAge, network: network, now: now, onWriteFailure: onWriteFailure, page: page,
            append: { list, page, cursor in list.appending(page, loadedWith: cursor, maxPages: maxPages) })
    }

    /// Makes the store of the lists and the loaders of their next pages, appended with `append`.
    private static func make<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>], maxAge: Duration?, network: NetworkMode,
        now: @escaping @Sendable () -> Date, onWriteFailure: @escaping @Sendable (any Error) -> Void,
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader,
        append: @escaping AppendingNextPage<Key, Item, Cursor>.Append
    ) -> (Store<Key, PagedList<Item, Cursor>>, LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>)
    where PageLoader.Output == Page<Item, Cursor> {
        let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>> = { key, cursor in
            AnyLoader(page(key, cursor))
        }
        // The store's fetch reads the list it refreshes from the store itself: a reference set once it exists.
        let link = StoreLink<Key, PagedList<Item, Cursor>>()
        let store = Store(
            levels: levels,
            fetch: LoaderFamily { key in PageRefresh(key: key, link: link, page: page) },
            maxAge: maxAge, network: network, now: now, onWriteFailure: onWriteFailure)
        link.set(store)
        let appending = AppendingNextPage(link: link, page: page, append: append)
        return (store, LoaderFamily { key in appending.loader(for: key) }.coalesced())
    }

    /// Loads the first page of `key`'s list when it has none (in the store or its levels), else the page after its
    /// last, appends it, and gives `completion` the list once it is saved. When the list has no next page, gives it
    /// as it is. Concurrent calls for one key share one request; the returned token drops only this caller's
    /// interest.
    ///
    /// ```swift
    /// feeds.loadNextPage(of: "home") { result in show(result) }
    /// ```
    @discardableResult
    public func loadNextPage(
        of key: Key, completion: @escaping @Sendable (Result<StoreResponse<PagedList<Item, Cursor>>, any Error>) -> Void
    ) -> any CancellationToken {
        nextPages[key].load(completion: completion)
    }

    /// The next page of `key`'s list as a loader: each load does what ``loadNextPage(of:completion:)`` does.
    ///
    /// ```swift
    /// let next = feeds.nextPage(of: "home").dispatchOnMainQueue()
    /// ```
    public func nextPage(of key: Key) -> AnyLoader<StoreResponse<PagedList<Item, Cursor>>> {
        nextPages[key]
    }

    /// The next page of `key`'s list as a loader.
    @available(*, deprecated, renamed: "nextPage(of:)", message: "loadNextPage(of:completion:) loads at once")
    public func loadNextPage(of key: Key) -> AnyLoader<StoreResponse<PagedList<Item, Cursor>>> {
        nextPage(of: key)
    }
}

extension PagedStore where Item: Identifiable, Item.ID: Sendable {
    /// Creates a store of paged lists of identifiable items: a page's items that the list shows already (offset
    /// paging after an insert at the top) are dropped from the page as it is appended.
    /// - Parameters:
    ///   - levels: the caches of the lists, fastest first (see ``Store``).
    ///   - maxPages: how many pages a list keeps at most (the oldest are dropped); `nil` for no limit.
    ///   - maxAge: how long a list stays fresh for cache-first reads (see ``Store``).
    ///   - network: what loads do while the network cannot be reached.
    ///   - now: the clock lists are stamped with.
    ///   - onWriteFailure: told of every failed level write.
    ///   - page: the page of a key's list that a cursor points to (`nil`: the first page).
    public convenience init<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>],
        maxPages: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader
    ) where PageLoader.Output == Page<Item, Cursor> {
        self.init(
            made: Self.make(
                levels: levels, maxAge: maxAge, network: network, now: now, onWriteFailure: onWriteFailure,
                page: page,
                append: { list, page, cursor in list.appending(page, loadedWith: cursor, maxPages: maxPages) }))
    }
}

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
            // The first page equal to the one it stands for ends the walk: the pages after it are kept.
            if index < old.count, old[index].page == loaded, old[index].cursor == cursor {
                return (fresh + old[index...], nil)
            }
            fresh.append(Loaded(cursor: cursor, page: loaded))
            guard let next = loaded.nextCursor, fresh.count < old.count else { return (fresh, nil) }
            return (nil, next)
        }
        if let pages { return pending.complete(.success(PagedList(pages: pages))) }
        load(next)
    }
}

/// The next page of a key's list, appended in order with the key's other changes.
struct AppendingNextPage<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>:
    Sendable
{
    typealias List = PagedList<Item, Cursor>
    /// How a page, loaded with a cursor, is appended to a list.
    typealias Append = @Sendable (List, Page<Item, Cursor>, Cursor?) -> List

    let link: StoreLink<Key, List>
    let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>
    let append: Append

    func loader(for key: Key) -> AnyLoader<StoreResponse<List>> {
        AnyLoader { [self] completion in
            let pending = PendingLoad(completion)
            guard let store = link.store else {
                pending.complete(.failure(CancellationError()))
                return pending
            }
            pending.startStep {
                store.read(key, policy: .cacheOnly).load { shown in
                    guard case .success(let response) = shown, let list = response.value else {
                        // No list yet, in the store or its levels: its first page, through the store's fetch.
                        return pending.startStep { store.read(key).load { pending.complete($0) } }
                    }
                    guard list.hasNextPage else { return pending.complete(shown) }  // the end
                    pending.startStep { append(after: list, of: key, in: store, pending) }
                }
            }
            return pending
        }
    }

    private func append(
        after before: List, of key: Key, in store: Store<Key, List>, _ pending: PendingLoad<StoreResponse<List>>
    ) -> any CancellationToken {
        let cursor = before.nextCursor
        return page(key, cursor).load { [append] result in
            let loaded: Page<Item, Cursor>
            switch result {
            case .success(let page): loaded = page
            case .failure(let error): return pending.complete(.failure(error))
            }
            store.updateFetched(key) { list in
                // A list whose last page changed under the request (a refresh, a live change) does not get it: an
                // offset, say, may point elsewhere now.
                guard let list, list.lastPage == before.lastPage else { return list }
                return append(list, loaded, cursor)
            } completion: {
                pending.complete($0)
            }
        }
    }
}
