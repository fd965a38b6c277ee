#if canImport(Observation)
    import Observation

    /// A loading resource for a screen: an `@Observable` model on the main actor that SwiftUI views and UIKit
    /// controllers bind to directly.
    ///
    /// ```swift
    /// @MainActor final class FriendScreen {
    ///     let model: ResourceModel<String>
    ///
    ///     init(store: Store<String, String>) {
    ///         model = ResourceModel(store: store, key: "u1")
    ///     }
    ///
    ///     func appeared() {
    ///         model.load()                         // loading, then loaded (or failed, keeping the value shown)
    ///     }
    ///
    ///     func pulledToRefresh() async {
    ///         await model.refresh()                // a fresh value, never absorbed by a load already running
    ///     }
    ///
    ///     func tappedRetry() {
    ///         Task { await model.refresh() }
    ///     }
    /// }
    /// ```
    /// The model shows one key of a ``Store`` (or a loader alone): ``state`` is a ``LoadingState`` that follows every
    /// change of the key, whoever made it (a load, a live update written to the store, an optimistic edit, a logout),
    /// and ``value``, ``isLoading`` and ``error`` read it. Reading them in a SwiftUI `body` or in
    /// `withObservationTracking` registers the dependency; the model changes them on the main actor only.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Observable
    public final class ResourceModel<Value: Sendable> {
        /// What the screen shows: idle, loading (keeping the value shown), loaded, or failed (keeping the value shown).
        public private(set) var state: LoadingState<Value>

        @ObservationIgnored private let repository: ResourceRepository<Value>
        @ObservationIgnored private var subscription: StreamSubscription?
        /// The version of the state shown: a state older than it is never shown again.
        @ObservationIgnored private var version: Int

        /// Creates a model showing `repository`'s state.
        public init(repository: ResourceRepository<Value>) {
            self.repository = repository
            (version, state) = repository.currentVersionedState
            subscription = repository.versionedStates.sink(on: .main) { [weak self] versioned in
                self?.show(versioned)
            }
        }

        /// Creates a model showing `key` of `store`, read with `policy`.
        public convenience init<Key>(store: Store<Key, Value>, key: Key, policy: ReadPolicy = .cacheFirst) {
            self.init(repository: ResourceRepository(store: store, key: key, policy: policy, scheduler: .immediate))
        }

        /// Creates a model over `loader` alone.
        public convenience init<L: Loader>(loader: L) where L.Output == Value {
            self.init(repository: ResourceRepository(loader: loader, scheduler: .immediate))
        }

        /// The value to show, kept while loading and after a failure.
        public var value: Value? { state.value }

        /// Whether a load or a refresh is running.
        public var isLoading: Bool { state.isLoading }

        /// The failure of the latest load, while it is the latest.
        public var error: (any Error)? { state.error }

        /// Loads, joining a load already running.
        public func load() {
            repository.load()
        }

        /// Fetches a fresh value, even while a load is running, and returns once it is shown (or has failed): what
        /// SwiftUI's `refreshable` awaits. From synchronous code: `Task { await model.refresh() }`.
        public func refresh() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                repository.refresh { _ in continuation.resume() }
            }
            show(repository.currentVersionedState)  // even if its delivery to the main actor has not run yet
        }

        private func show(_ versioned: (version: Int, state: LoadingState<Value>)) {
            guard versioned.version > version else { return }
            version = versioned.version
            state = versioned.state
        }

        /// Shows `change` at once and sends it upstream with `commit`; when `commit` fails, only this change is undone.
        /// The change is shown before this returns, even while another thread is delivering the model's states.
        @discardableResult
        public func mutate<Commit: Loader>(
            _ change: @escaping @Sendable (Value?) -> Value?,
            commit: Commit,
            completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
        ) -> any CancellationToken {
            let token = repository.mutate(change, commit: commit, completion: completion)
            show(repository.currentVersionedState)  // its delivery may be queued behind another thread's
            return token
        }
    }
#endif
