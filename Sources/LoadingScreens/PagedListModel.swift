import Loading

#if canImport(Observation)
    import Observation

    /// A paged list on a screen: an `@Observable` model on the main actor over one key of a `PagedStore`, with
    /// what an endless list shows beside its items (loading more, the end reached, a page that failed, and retry).
    ///
    /// ```swift
    /// @MainActor final class FeedScreen {
    ///     let feed: PagedListModel<String, Post, Int>
    ///
    ///     init(posts: PagedStore<String, Post, Int>) {
    ///         feed = PagedListModel(store: posts, key: "home")
    ///     }
    ///
    ///     func appeared() { feed.load() }
    ///     func reachedTheLastRow() { feed.loadNextPage() }   // nothing while a page loads or at the end
    ///     func tappedRetry() { feed.loadNextPage() }         // after nextPageError
    /// }
    /// ```
    /// `list` is the list's own ``ResourceModel`` (the first load, refreshes, live changes); the model adds the
    /// state of the next page, and of the previous page for a list that also grows upward (a chat:
    /// `loadPreviousPage()`, `isLoadingPreviousPage`, `isStartReached`, `previousPageError`).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Observable
    public final class PagedListModel<
        Key: Hashable & Sendable, Item: Sendable & Equatable, Cursor: Sendable & Equatable
    > {
        /// The list as a resource: loading, loaded, failed, refreshed.
        public let list: ResourceModel<PagedList<Item, Cursor>>
        /// Whether a next page is loading.
        public private(set) var isLoadingNextPage = false
        /// The failure of the last next page asked for, until it is asked again.
        public private(set) var nextPageError: (any Error)?

        /// Whether a previous page is loading (a list that grows upward).
        public private(set) var isLoadingPreviousPage = false
        /// The failure of the last previous page asked for, until it is asked again.
        public private(set) var previousPageError: (any Error)?

        @ObservationIgnored private let store: PagedStore<Key, Item, Cursor>
        @ObservationIgnored private let key: Key
        @ObservationIgnored private var nextPage: (any CancellationToken)?
        @ObservationIgnored private var previousPage: (any CancellationToken)?

        /// Creates a model showing `key`'s list of `store`.
        public init(store: PagedStore<Key, Item, Cursor>, key: Key) {
            self.store = store
            self.key = key
            list = ResourceModel(store: store.store, key: key)
        }

        /// The items of every page loaded, in order.
        public var items: [Item] {
            list.value?.items ?? []
        }

        /// Whether the last page is loaded.
        public var isEndReached: Bool {
            list.value.map { !$0.hasNextPage } ?? false
        }

        /// Whether the list's first page is loaded: no page remains above it.
        public var isStartReached: Bool {
            list.value.map { !$0.hasPreviousPage } ?? false
        }

        /// Loads the list (its first page, or what the store holds), joining a load already running.
        public func load() {
            list.load()
        }

        /// Loads the page after the last one; the first when there is no list yet. Does nothing while a page loads
        /// or once the end is reached. Also what a retry button calls after `nextPageError`.
        public func loadNextPage() {
            guard list.value != nil else { return load() }
            guard !isLoadingNextPage, !isEndReached else { return }
            isLoadingNextPage = true
            nextPageError = nil
            nextPage = store.nextPage(of: key).dispatchOnMainQueue().load { [weak self] result in
                MainActor.assumeIsolated { self?.nextPageEnded(with: result) }
            }
        }

        /// Loads the page before the first one (see `PagedStore.loadPreviousPage(of:)`); the first when
        /// there is no list yet. Does nothing while a previous page loads or once the start is reached. Also what a
        /// retry button calls after `previousPageError`.
        public func loadPreviousPage() {
            guard list.value != nil else { return load() }
            guard !isLoadingPreviousPage, !isStartReached else { return }
            isLoadingPreviousPage = true
            previousPageError = nil
            previousPage = store.previousPage(of: key).dispatchOnMainQueue().load { [weak self] result in
                MainActor.assumeIsolated { self?.previousPageEnded(with: result) }
            }
        }

        /// Revalidates the loaded pages (see `PagedStore`) and returns once the result is shown.
        public func refresh() async {
            await list.refresh()
        }

        private func nextPageEnded(with result: Result<StoreResponse<PagedList<Item, Cursor>>, any Error>) {
            isLoadingNextPage = false
            nextPage = nil
            if case .failure(let error) = result { nextPageError = error }
        }

        private func previousPageEnded(with result: Result<StoreResponse<PagedList<Item, Cursor>>, any Error>) {
            isLoadingPreviousPage = false
            previousPage = nil
            if case .failure(let error) = result { previousPageError = error }
        }
    }
#endif
