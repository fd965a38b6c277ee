import Loading

/// Where a ``ResourceModel`` takes its states from, and what runs when its screen asks for something: a key of a
/// `Store` (its states, `Store.states(for:)`).
struct ResourceSource<Value: Sendable>: Sendable {
    typealias Versioned = (version: Int, state: LoadingState<Value>)
    typealias Change = @Sendable (Value?) -> Value?
    typealias Mutate =
        @Sendable (
            _ change: @escaping Change, _ commit: AnyLoader<Void>,
            _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> any CancellationToken

    /// Tells this source from the one a model showed before (``ResourceModel/show(_:of:policy:)``).
    let id = SourceIdentity()
    /// The states, each with its version: a later state has a greater one.
    let states: EventStream<Versioned, Never>
    /// The state now.
    let current: @Sendable () -> Versioned
    let load: @Sendable () -> Void
    /// Fetches anew; calls its argument once the fresh value (or the failure) is shown.
    let refresh: @Sendable (_ done: @escaping @Sendable () -> Void) -> Void
    let mutate: Mutate

    /// `key` of `store`, read with `policy`.
    init<Key>(store: Store<Key, Value>, key: Key, policy: ReadPolicy) {
        states = store.states(for: key).map { ($0.version, $0.loadingState) }
        current = {
            let state = store.state(for: key)
            return (state.version, state.loadingState)
        }
        load = { _ = store.read(key, policy: policy).load { _ in } }
        refresh = { done in store.freshValue(of: key).load { _ in done() } }
        mutate = { change, commit, completion in store.mutate(key, change, commit: commit, completion: completion) }
    }

    /// `loader` alone: a store of one key whose fetch it is, read network first.
    init<L: Loader>(loader: L) where L.Output == Value {
        let store = Store<LoaderKey, Value>(levels: [], fetch: LoaderFamily { _ in loader })
        self.init(store: store, key: LoaderKey(), policy: .networkFirst)
    }
}

/// An identity, compared with `===`.
final class SourceIdentity: Sendable {}

/// The one key of a store over a loader alone.
struct LoaderKey: Hashable, Sendable {}
