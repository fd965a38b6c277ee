#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a ``Store`` shows for a key, with what a screen needs beside the value: whether the store is fetching the key
/// now (asking the network), and the failure of the latest fetch.
///
/// ```swift
/// let subscription = store.states(for: "u1").sink { state in
///     render(state.value, spinner: state.isLoading, banner: state.error)
/// }
/// store.read("u1").load { _ in }   // the store reads the key; its states follow, whoever asked
/// ```
/// ``Store/states(for:)`` publishes one when the key's value changes and when a fetch of the key begins, ends or
/// fails, for whoever asked: a screen's read, a refresh, a revalidation after an invalidation. Reading the levels is
/// not loading: a value the cache holds shows without a spinner first.
public struct StoreState<Value: Sendable>: Sendable {
    /// What the key shows: its value (with the pending changes applied), where it came from, the failure attached.
    private let response: StoreResponse<Value>

    /// Whether the store is fetching the key now.
    public let isLoading: Bool

    init(response: StoreResponse<Value>, isLoading: Bool) {
        self.response = response
        self.isLoading = isLoading
    }

    /// The state the store's core made, typed.
    init(_ core: StoreState<any StoreValueBox>) {
        response = StoreResponse(core.response)
        isLoading = core.isLoading
    }

    /// The value shown: the confirmed value with the pending changes applied; `nil` when there is none.
    public var value: Value? { response.value }

    /// The failure of the latest fetch of the key, until a value comes (the value shown, if any, stays).
    public var error: (any Error)? { response.error }

    /// Where the value shown came from (``StoreOrigin/local`` while changes are pending); `nil` when there is none.
    public var origin: StoreOrigin? { response.value == nil ? nil : response.origin }

    /// When the value shown was saved (for a cache hit, when the level saved it).
    public var savedAt: Date? { response.savedAt }

    /// Whether optimistic changes are still waiting for their commit.
    public var hasPendingChanges: Bool { response.hasPendingChanges }

    /// The order in which the store published its states: a later one has a greater version.
    package var version: Int { response.version }
}
