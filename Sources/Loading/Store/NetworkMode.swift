/// What a ``Store``'s fetches do while the network cannot be reached.
///
/// ```swift
/// let connectivity = ManualConnectivity()
/// let friends = Store(levels: [.cache(MemoryCache<String, Friend>(), name: "memory")],
///                     fetch: LoaderFamily { (id: String) in api.friend(id) },
///                     network: .waitsForNetwork(connectivity))
/// ```
/// Cache-first reads answer from the cache in every mode; the modes differ in what a read that needs the network
/// does. Neither of them fails in a loop: offline, nothing is requested.
public struct NetworkMode: Sendable {
    let connectivity: (any ConnectivityMonitor)?
    let waits: Bool

    /// Fetches start whatever the connectivity (the default).
    public static let always = NetworkMode(connectivity: nil, waits: false)

    /// Offline, a fetch waits and starts once `connectivity` is online again: a read that needs the network waits
    /// with it (cancel it to stop waiting), and a cache-then-network read answers with the cached value meanwhile.
    public static func waitsForNetwork(_ connectivity: some ConnectivityMonitor) -> NetworkMode {
        NetworkMode(connectivity: connectivity, waits: true)
    }

    /// Offline, a fetch fails at once with ``OfflineError``, without a request: a read answers with the cached value
    /// (the error attached), or fails when there is none.
    public static func answersFromCache(_ connectivity: some ConnectivityMonitor) -> NetworkMode {
        NetworkMode(connectivity: connectivity, waits: false)
    }

    /// Whether the mode says the network cannot be reached now.
    var isOffline: Bool {
        connectivity.map { !$0.isOnline } ?? false
    }
}
