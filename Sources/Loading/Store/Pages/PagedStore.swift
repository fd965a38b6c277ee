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
/// feeds.nextPage(of: "home").load { result in show(result) }     // the first page, then each next one
/// feeds.store.freshValue(of: "home").load { _ in }                // revalidates the loaded pages
/// feeds.store.update("home") { $0?.replacing(editedPost) }        // a live change, in the page that holds it
/// ```
///
/// - **Loading more**: ``loadNextPage(of:)`` loads the first page when the key has no list (in the store
///   or its levels), else the page after the last one, appends it and saves the list at once
///   (``nextPage(of:)`` is the same as a loader, to compose). Concurrent calls for a key share one request (and
///   its answer); a caller's cancel drops its interest alone, and the last one's cancels the request. A page that
///   arrives after the list's last page changed (a refresh, a live change of that page) is dropped: an offset may
///   point elsewhere now; ask again. With no list, the call is a cache-first read of the store, which joins a
///   refresh of the key in flight.
/// - **Repeats**: a page whose next cursor was loaded already ends the list; with `Identifiable` items, a page's
///   items the list shows already are dropped from it (see ``PagedList``).
/// - **Both ways**: a source whose pages give previous cursors (``Page/previousCursor``: a chat, a timeline opened
///   in the middle) also grows upward with ``loadPreviousPage(of:)``, which prepends the page before the
///   list's first, as loading more appends.
/// - **A page cap**: with `maxPages`, adding a page drops the pages at the other end: appending drops the oldest,
///   and the list then starts at a later page (``PagedList/startsAtFirstPage`` is `false`, and a refresh starts from
///   there); prepending drops the last ones, which loading more brings back.
/// - **Refreshing** (the store's fetch: ``Store/refresh(_:)``, an invalidation, a revalidation, a read that finds
///   the list stale) loads the loaded pages again, in order, from the list's first cursor. Each fresh page replaces
///   the page it stands for; at the **first fresh page equal to the one it replaces, the refresh stops** and keeps
///   the pages after it as they are (nothing changed above them; in a list that grew upward, the pages are compared
///   by their items only, since the walk reaches them by next cursors). Otherwise it goes on with the fresh page's next
///   cursor until it has loaded as many pages as the list had (or the source says there are no more: the list then
///   ends there). A page that fails fails the refresh, and the list stays as it was. Pages appended and live
///   changes made while it runs are applied again to the pages it brings, so a refresh never undoes them (a page
///   appended, only when the refreshed list still ends with the page it followed).
/// - Live changes go through the store (``Store/update(_:_:)``) with the list's helpers (``PagedList/replacing(_:)``,
///   ``PagedList/removing(id:)``, ``PagedList/inserting(_:)``), in order with every other change of the key.
public final class PagedStore<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>:
    Sendable
{
    /// The store of the lists: observe it, read it, invalidate it, or show a key with a `ResourceModel`.
    public let store: Store<Key, PagedList<Item, Cursor>>
    private let nextPages: LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>
    private let previousPages: LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>

    private init(made: Made) {
        (store, nextPages, previousPages) = made
    }

    /// The options a paged store passes to its store.
    private struct Options {
        let keptValues: Int?
        let maxAge: Duration?
        let network: NetworkMode
        let now: @Sendable () -> Date
        let sharing: ProcessSharing<Key>?
        let entities: EntitySharing<PagedList<Item, Cursor>>?
        let onWriteFailure: @Sendable (any Error) -> Void
        let events: (@Sendable (StoreEvent<Key>) -> Void)?
    }

    /// A paged store's parts: its store, and the loaders of its lists' next and previous pages.
    private typealias Made = (
        Store<Key, PagedList<Item, Cursor>>, LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>,
        LoaderFamily<Key, StoreResponse<PagedList<Item, Cursor>>>
    )

    /// Creates a store of paged lists.
    /// - Parameters:
    ///   - levels: the caches of the lists, fastest first (see ``Store``).
    ///   - maxPages: how many pages a list keeps at most (those at the other end from where one is added are
    ///     dropped); `nil` for no limit.
    ///   - keptValues: how many lists of keys no longer in use the store keeps itself (see ``Store``).
    ///   - maxAge: how long a list stays fresh for cache-first reads (see ``Store``).
    ///   - network: what loads do while the network cannot be reached.
    ///   - now: the clock lists are stamped with.
    ///   - sharing: how the lists keep in step with other processes over a level they share (a widget following
    ///     the app's lists; see ``ProcessSharing``).
    ///   - entities: the entities the items are, shared with other keys and stores (see ``SharedEntities``).
    ///   - onWriteFailure: told of every failed level write.
    ///   - events: told what happens, for logs, metrics and traces (see ``StoreEvent``).
    ///   - page: the page of a key's list that a cursor points to (`nil`: the first page).
    public init<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>],
        maxPages: Int? = nil,
        keptValues: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        sharing: ProcessSharing<Key>? = nil,
        entities: EntitySharing<PagedList<Item, Cursor>>? = nil,
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        events: (@Sendable (StoreEvent<Key>) -> Void)? = nil,
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader
    ) where PageLoader.Output == Page<Item, Cursor> {
        (store, nextPages, previousPages) = Self.make(
            levels: levels,
            options: Options(
                keptValues: keptValues, maxAge: maxAge, network: network, now: now, sharing: sharing,
                entities: entities, onWriteFailure: onWriteFailure, events: events), page: page,
            add: { list, page, cursor, before in
                before
                    ? list.prepending(page, loadedWith: cursor, maxPages: maxPages)
                    : list.appending(page, loadedWith: cursor, maxPages: maxPages)
            })
    }

    /// Makes the store of the lists and the loaders of their next and previous pages, added with `add`.
    private static func make<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>], options: Options,
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader, add: @escaping AddingPage<Key, Item, Cursor>.Add
    ) -> Made where PageLoader.Output == Page<Item, Cursor> {
        let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>> = { key, cursor in
            AnyLoader(page(key, cursor))
        }
        // The store's fetch reads the list it refreshes from the store itself: a reference set once it exists.
        let link = StoreLink<Key, PagedList<Item, Cursor>>()
        let store = Store(
            levels: levels,
            fetch: LoaderFamily { key in PageRefresh(key: key, link: link, page: page) },
            keptValues: options.keptValues, maxAge: options.maxAge, network: options.network, now: options.now,
            sharing: options.sharing, entities: options.entities, onWriteFailure: options.onWriteFailure,
            events: options.events)
        link.set(store)
        let next = AddingPage(store: store, page: page, before: false, add: add)
        let previous = AddingPage(store: store, page: page, before: true, add: add)
        return (store, next.family.coalesced(), previous.family.coalesced())
    }

    /// Loads the first page of `key`'s list when it has none (in the store or its levels), else the page after its
    /// last, appends it, and returns the list once it is saved. When the list has no next page, returns it as it is.
    /// Concurrent calls for one key share one request. Cancelling the task drops this caller's interest (the request
    /// goes on while another caller waits for it); this then throws `CancellationError`.
    ///
    /// ```swift
    /// let list = try await feeds.loadNextPage(of: "home").value
    /// ```
    @discardableResult
    public func loadNextPage(of key: Key) async throws -> StoreResponse<PagedList<Item, Cursor>> {
        try await nextPages[key].load()
    }

    /// The next page of `key`'s list as a loader: each load does what ``loadNextPage(of:)`` does (to compose, or to
    /// load with a completion); the token a load returns drops only that caller's interest.
    ///
    /// ```swift
    /// let next = feeds.nextPage(of: "home").dispatchOnMainQueue()
    /// ```
    public func nextPage(of key: Key) -> AnyLoader<StoreResponse<PagedList<Item, Cursor>>> {
        nextPages[key]
    }

    /// Loads the first page of `key`'s list when it has none (as ``loadNextPage(of:)`` does), else the page before
    /// its first (the previous cursor of its first page), prepends it, and returns the list once it is saved; with a page
    /// cap, the pages at the list's end are dropped. When the list has no previous page, returns it as it is.
    /// Concurrent calls for one key share one request. Cancelling the task drops this caller's interest; this then
    /// throws `CancellationError`.
    ///
    /// ```swift
    /// let messages = try await chat.loadPreviousPage(of: "room-7").value
    /// ```
    @discardableResult
    public func loadPreviousPage(of key: Key) async throws -> StoreResponse<PagedList<Item, Cursor>> {
        try await previousPages[key].load()
    }

    /// The previous page of `key`'s list as a loader: each load does what ``loadPreviousPage(of:)`` does.
    public func previousPage(of key: Key) -> AnyLoader<StoreResponse<PagedList<Item, Cursor>>> {
        previousPages[key]
    }
}

extension PagedStore where Item: Identifiable, Item.ID: Sendable {
    /// Creates a store of paged lists of identifiable items: a page's items that the list shows already (offset
    /// paging after an insert at the top) are dropped from the page as it is appended.
    /// - Parameters:
    ///   - levels: the caches of the lists, fastest first (see ``Store``).
    ///   - maxPages: how many pages a list keeps at most (those at the other end from where one is added are
    ///     dropped); `nil` for no limit.
    ///   - keptValues: how many lists of keys no longer in use the store keeps itself (see ``Store``).
    ///   - maxAge: how long a list stays fresh for cache-first reads (see ``Store``).
    ///   - network: what loads do while the network cannot be reached.
    ///   - now: the clock lists are stamped with.
    ///   - sharing: how the lists keep in step with other processes over a level they share (a widget following
    ///     the app's lists; see ``ProcessSharing``).
    ///   - entities: the entities the items are, shared with other keys and stores (see ``SharedEntities``).
    ///   - onWriteFailure: told of every failed level write.
    ///   - events: told what happens, for logs, metrics and traces (see ``StoreEvent``).
    ///   - page: the page of a key's list that a cursor points to (`nil`: the first page).
    public convenience init<PageLoader: Loader>(
        levels: [StoreLevel<Key, PagedList<Item, Cursor>>],
        maxPages: Int? = nil,
        keptValues: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        sharing: ProcessSharing<Key>? = nil,
        entities: EntitySharing<PagedList<Item, Cursor>>? = nil,
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        events: (@Sendable (StoreEvent<Key>) -> Void)? = nil,
        page: @escaping @Sendable (Key, Cursor?) -> PageLoader
    ) where PageLoader.Output == Page<Item, Cursor> {
        self.init(
            made: Self.make(
                levels: levels,
                options: Options(
                    keptValues: keptValues, maxAge: maxAge, network: network, now: now, sharing: sharing,
                    entities: entities, onWriteFailure: onWriteFailure, events: events), page: page,
                add: { list, page, cursor, before in
                    before
                        ? list.prepending(page, loadedWith: cursor, maxPages: maxPages)
                        : list.appending(page, loadedWith: cursor, maxPages: maxPages)
                }))
    }
}

/// The next (or previous) page of a key's list, added in order with the key's other changes.
struct AddingPage<Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable>: Sendable {
    typealias List = PagedList<Item, Cursor>
    /// How a page, loaded with a cursor, is added to a list: after its last page, or before its first.
    typealias Add = @Sendable (List, Page<Item, Cursor>, Cursor?, _ before: Bool) -> List

    /// The store of the lists, held weakly: a page's loader outliving its paged store fails with `CancellationError`.
    private weak let store: Store<Key, List>?
    let page: @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>
    /// Whether the page is the one before the list's first (else the one after its last).
    let before: Bool
    let add: Add

    init(
        store: Store<Key, List>, page: @escaping @Sendable (Key, Cursor?) -> AnyLoader<Page<Item, Cursor>>,
        before: Bool, add: @escaping Add
    ) {
        self.store = store
        self.page = page
        self.before = before
        self.add = add
    }

    /// The pages of this side as a family: each load of a key adds its next page. A load is started as it is, not
    /// through a loader made for it.
    var family: LoaderFamily<Key, StoreResponse<List>> {
        LoaderFamily(
            makeLoader: { key in AnyLoader { load(key, completion: $0) } },
            startLoad: { key, completion in load(key, completion: completion) })
    }

    private func load(
        _ key: Key, completion: @escaping LoadCompletion<StoreResponse<List>>
    ) -> any CancellationToken {
        let pending = PendingLoad(completion)
        guard let store else {
            pending.complete(.failure(CancellationError()))
            return pending
        }
        // The list the store holds answers at once, in one look under its lock; else the store reads its levels (a
        // cache-only read).
        if let held = store.heldResponse(key) {
            addPage(to: .success(held), of: key, in: store, pending)
        } else {
            pending.startStep {
                store.read(key, policy: .cacheOnly).load { addPage(to: $0, of: key, in: store, pending) }
            }
        }
        return pending
    }

    /// Loads the page after (or before) `shown`, the list a cache-only read found, and adds it; with no list, reads
    /// the key through the store's fetch (its first page).
    private func addPage(
        to shown: Result<StoreResponse<List>, any Error>, of key: Key, in store: Store<Key, List>,
        _ pending: PendingLoad<StoreResponse<List>>
    ) {
        guard case .success(let response) = shown, let list = response.value else {
            // No list yet, in the store or its levels: its first page, through the store's fetch.
            return pending.startStep { store.read(key).load { pending.complete($0) } }
        }
        guard let cursor = before ? list.previousCursor : list.nextCursor else {
            return pending.complete(shown)  // the end, on this side
        }
        pending.startStep { add(cursor, to: list, of: key, in: store, pending) }
    }

    private func add(
        _ cursor: Cursor, to shown: List, of key: Key, in store: Store<Key, List>,
        _ pending: PendingLoad<StoreResponse<List>>
    ) -> any CancellationToken {
        page(key, cursor).load { [self] result in
            let loaded: Page<Item, Cursor>
            switch result {
            case .success(let page): loaded = page
            case .failure(let error): return pending.complete(.failure(error))
            }
            // One closure on the value the store keeps, boxed: this runs unspecialized, where each closure
            // wrapped around another looks up the metadata of its types again.
            store.updateFetched(key) { box in
                guard let box else { return nil }
                let list = (box as! ValueBox<List>).value
                // A list whose end changed under the request (a refresh, a live change) does not get it: an
                // offset, say, may point elsewhere now.
                guard list.hasSameEnd(as: shown, before: before) else { return box }
                return ValueBox(add(list, loaded, cursor, before))
            } reply: { reply in
                switch reply {
                case .success(let snapshot): pending.complete(.success(StoreResponse(snapshot.response)))
                case .failure(let error): pending.complete(.failure(error))
                }
            }
        }
    }
}
