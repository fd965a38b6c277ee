import Loading

#if canImport(Observation)
    import Dispatch
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
    /// The model shows one key of a `Store` (or a loader alone): `state` is a ``LoadingState`` that follows the
    /// store's states of the key (`Store.states(for:)`): every change of the key, whoever made it (a load, a live
    /// update written to the store, an optimistic edit, a logout), and loading whenever the store fetches it,
    /// whoever asked. `value`, `isLoading` and `error` read it. Reading them in a SwiftUI `body` or in
    /// `withObservationTracking` registers the dependency; the model changes them on the main actor only. A change
    /// made on the main thread shows before the call that made it returns, even behind other work queued on the
    /// main queue (unless another thread is delivering the key's states at that moment: it then follows them).
    ///
    /// Renders are not wasted: for an `Equatable` value, a state equal to the one shown is not set again, whichever
    /// thread it comes from and wherever the model was made (in generic code too), and `select(_:)` gives a part
    /// of the value that changes only when that part does. `show(_:of:policy:)` moves the model to another key,
    /// keeping the value shown as a placeholder until the new key's arrives.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Observable
    public final class ResourceModel<Value: Sendable> {
        /// What the screen shows: idle, loading (keeping the value shown), loaded, or failed (keeping the value shown).
        public private(set) var state: LoadingState<Value>

        /// Whether the value shown belongs to the key shown before `show(_:of:policy:)`, kept until the new key's
        /// value arrives.
        public private(set) var isPlaceholder = false

        @ObservationIgnored private var source: ResourceSource<Value>
        @ObservationIgnored private var subscription: StreamSubscription?
        /// The version of the state shown: a state older than it is never shown again.
        @ObservationIgnored private var version: Int
        @ObservationIgnored private let isSameState: (LoadingState<Value>, LoadingState<Value>) -> Bool
        /// Updates the selections made with `select(_:)` that are still alive.
        @ObservationIgnored private var selections: [(Value?) -> Bool] = []

        /// Creates a model showing `key` of `store`, read with `policy`: the store's states of the key
        /// (`Store.states(for:)`), whoever loads it. When the value is `Equatable`, a state equal to the one shown
        /// is not set again.
        public convenience init<Key>(store: Store<Key, Value>, key: Key, policy: ReadPolicy = .cacheFirst) {
            self.init(
                source: ResourceSource(store: store, key: key, policy: policy), isSameState: Self.areEqualIfComparable)
        }

        /// Creates a model over `loader` alone: a store of one key whose fetch it is, read network first.
        public convenience init<L: Loader>(loader: L) where L.Output == Value {
            self.init(source: ResourceSource(loader: loader), isSameState: Self.areEqualIfComparable)
        }

        /// Whether two states are equal, when the value is `Equatable`: known at run time, so that a model made in
        /// generic code, where the `Equatable` initializer is not chosen, does not set an equal state again either.
        private nonisolated static func areEqualIfComparable(
            _ shown: LoadingState<Value>, _ new: LoadingState<Value>
        ) -> Bool {
            guard let shown = shown as? any Equatable else { return false }
            return shown.isEqual(to: new)
        }

        private init(
            source: ResourceSource<Value>,
            isSameState: @escaping (LoadingState<Value>, LoadingState<Value>) -> Bool
        ) {
            self.source = source
            self.isSameState = isSameState
            (version, state) = source.current()
            subscribe()
        }

        /// The value to show, kept while loading and after a failure.
        public var value: Value? { state.value }

        /// Whether a load or a refresh is running.
        public var isLoading: Bool { state.isLoading }

        /// The failure of the latest load, while it is the latest.
        public var error: (any Error)? { state.error }

        /// Loads, joining a load already running.
        public func load() {
            source.load()
        }

        /// Fetches a fresh value, even while a load is running, and returns once it is shown (or has failed): what
        /// SwiftUI's `refreshable` awaits. From synchronous code: `Task { await model.refresh() }`.
        public func refresh() async {
            let source = source
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                source.refresh { continuation.resume() }
            }
            // Even if its delivery to the main actor has not run yet (unless the model moved to another key).
            if source.id === self.source.id { show(source.current()) }
        }

        /// Shows `change` at once and sends it upstream with `commit`; when `commit` fails, only this change is undone.
        /// The change is shown before this returns, even while another thread is delivering the model's states.
        @discardableResult
        public func mutate<Commit: Loader>(
            _ change: @escaping @Sendable (Value?) -> Value?,
            commit: Commit,
            completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
        ) -> any CancellationToken {
            let token = source.mutate(change, AnyLoader(commit.map { _ in () }), completion)
            show(source.current())  // its delivery may be queued behind another thread's
            return token
        }

        /// Shows `change` at once, sends it upstream with `commit`, and returns once it is settled: once the
        /// confirmed value is saved, or, refused, throws the commit's error once only this change is undone.
        /// Cancelling the task cancels the commit and undoes the change; this then throws `CancellationError`.
        ///
        /// ```swift
        /// try await model.mutate({ _ in "Ada L." }, commit: api.rename("u1", to: "Ada L."))
        /// ```
        public func mutate<Commit: Loader>(
            _ change: @escaping @Sendable (Value?) -> Value?, commit: Commit
        ) async throws {
            if Task.isCancelled { throw CancellationError() }
            // Started here, on the main actor, so that the change shows before the first suspension.
            let bridge = AsyncLoadBridge<Void>()
            try await bridge.awaitAnswer(cancelling: mutate(change, commit: commit) { bridge.complete(with: $0) })
        }

        /// Moves the model to `key` of `store` (a new search term, another profile) and loads it. Until the key's
        /// value arrives, the value shown stays as a placeholder (`isPlaceholder`, and `state` is loading with
        /// it); a failure of the new key's load shows no placeholder.
        ///
        /// ```swift
        /// let profile = ResourceModel(store: profiles, key: "u1")
        /// profile.show("u2", of: profiles)   // u1 stays on screen, loading, until u2 arrives
        /// ```
        public func show<Key>(_ key: Key, of store: Store<Key, Value>, policy: ReadPolicy = .cacheFirst) {
            subscription?.cancel()
            let placeholder = state.value
            source = ResourceSource(store: store, key: key, policy: policy)
            let (newVersion, newState) = source.current()
            version = newVersion
            if let placeholder, newState.value == nil, newState.error == nil {
                isPlaceholder = true
                set(.loading(previous: placeholder))
            } else {
                isPlaceholder = false
                set(newState)
            }
            subscribe()
            source.load()
        }

        /// A part of the value that changes only when that part does: a view that reads it renders again only then.
        ///
        /// ```swift
        /// let name = friend.select { $0?.name }   // a Selection<String?>
        /// ```
        /// Keep the selection for as long as it is read; the model stops updating it once it is released.
        public func select<Part: Equatable>(_ part: @escaping (Value?) -> Part) -> Selection<Part> {
            let selection = Selection(part(state.value))
            selections.append { [weak selection] value in
                guard let selection else { return false }
                selection.update(part(value))
                return true
            }
            return selection
        }

        /// States made on the main thread show at once, even behind other work queued on the main queue (the
        /// versions keep an older state from replacing a newer one); states from other threads hop to it. A state
        /// of a source the model no longer shows is dropped.
        private func subscribe() {
            let id = source.id
            subscription = source.states.sink { [weak self] versioned in
                guard MainQueueScheduler.isOnMainQueue else {
                    return DispatchQueue.main.async { self?.show(versioned, from: id) }
                }
                MainActor.assumeIsolated { self?.show(versioned, from: id) }
            }
        }

        private func show(_ versioned: (version: Int, state: LoadingState<Value>), from id: SourceIdentity) {
            guard id === source.id else { return }
            show(versioned)
        }

        private func show(_ versioned: (version: Int, state: LoadingState<Value>)) {
            guard versioned.version > version else { return }
            version = versioned.version
            if isPlaceholder, versioned.state.value == nil, versioned.state.error == nil {
                return set(.loading(previous: state.value))  // still waiting for the new key's value
            }
            if isPlaceholder { isPlaceholder = false }
            set(versioned.state)
        }

        private func set(_ newState: LoadingState<Value>) {
            guard !isSameState(state, newState) else { return }
            state = newState
            selections = selections.filter { $0(newState.value) }
        }
    }

    /// A part of a ``ResourceModel``'s value (``ResourceModel/select(_:)``), set only when it changes.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Observable
    public final class Selection<Part: Equatable> {
        /// The part of the value shown.
        public private(set) var value: Part

        init(_ value: Part) {
            self.value = value
        }

        func update(_ newValue: Part) {
            if newValue != value { value = newValue }
        }
    }

    extension Equatable {
        /// Whether `other` is a value of this type equal to this one.
        fileprivate func isEqual(to other: Any) -> Bool {
            (other as? Self) == self
        }
    }
#endif
