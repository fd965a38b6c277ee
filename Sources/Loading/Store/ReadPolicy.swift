#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where a ``Store`` read comes from and when to go to the network.
///
/// A value is **fresh** for a policy when it was not invalidated (``Store/invalidate(_:)``) and, when the policy or
/// the store has a maximum age, was saved less than that long ago. Cache-first reads serve only fresh values;
/// cache-then-network reads answer with any cached value and fetch unless it is fresh.
public struct ReadPolicy: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case cacheFirst, cacheThenNetwork, networkFirst, cacheOnly, networkOnly
    }

    let kind: Kind
    /// How old, in seconds, a value may be to be fresh (`nil`: any age).
    let maxAgeSeconds: Double?
    /// How long past its age, in seconds, a value may still answer a read whose fetch failed (`nil`: any time).
    let maxStaleSeconds: Double?

    init(kind: Kind, maxAgeSeconds: Double?, maxStaleSeconds: Double? = nil) {
        self.kind = kind
        self.maxAgeSeconds = maxAgeSeconds
        self.maxStaleSeconds = maxStaleSeconds
    }

    init(kind: Kind, maxAge: Duration? = nil, maxStale: Duration? = nil) {
        self.init(kind: kind, maxAgeSeconds: maxAge.map(\.seconds), maxStaleSeconds: maxStale.map(\.seconds))
    }

    /// Whether a value saved at `savedAt` (`nil`: no date) may answer a read whose fetch failed at `now`: any value,
    /// unless the policy bounds how stale (then one less than its maximum age plus `maxStale` old; one stamped later
    /// than `now` is young).
    func servesAfterFailure(savedAt: Date?, now: Date) -> Bool {
        guard let maxStaleSeconds, let savedAt else { return true }
        return now.timeIntervalSince(savedAt) < (maxAgeSeconds ?? 0) + maxStaleSeconds
    }

    /// Whether a value saved at `savedAt` is young enough for this policy at `now`: as `CacheExpiry.maxAge` judges,
    /// younger than the age and not stamped in the future.
    func accepts(savedAt: Date, now: Date) -> Bool {
        guard let maxAgeSeconds else { return true }
        return savedAt <= now && now.timeIntervalSince(savedAt) < maxAgeSeconds
    }

    /// This policy with `maxAgeSeconds` as its maximum age when it has none and judges age (cache first, cache then
    /// network): how a store's own maximum age applies to its reads.
    func defaulting(maxAgeSeconds defaultAge: Double?) -> ReadPolicy {
        guard let defaultAge, maxAgeSeconds == nil, kind == .cacheFirst || kind == .cacheThenNetwork else {
            return self
        }
        return ReadPolicy(kind: kind, maxAgeSeconds: defaultAge, maxStaleSeconds: maxStaleSeconds)
    }

    /// The store's or a level's fresh value when there is one, else the network; when the fetch fails, the value
    /// shown (stale or old) with the error attached.
    public static let cacheFirst = ReadPolicy(kind: .cacheFirst)
    /// Like ``cacheFirst``, but a value counts as fresh only while it was saved less than `maxAge` ago (the store's
    /// value and each level's); an older one is read anew from the levels, else the network, and stays shown if
    /// both fail.
    public static func cacheFirst(maxAge: Duration) -> ReadPolicy {
        ReadPolicy(kind: .cacheFirst, maxAge: maxAge)
    }
    /// Like ``cacheFirst(maxAge:)`` (the store's `maxAge` when `maxAge` is `nil`), and when the fetch fails, the
    /// value shown or a level's with the error attached only while it is at most its age plus `maxStale` old
    /// (stale-if-error, bounded); an older one fails the read as if there were none.
    ///
    /// ```swift
    /// let quote = try await store.read(symbol, policy: .cacheFirst(maxAge: .seconds(5), maxStale: .seconds(60)))
    ///     .load()
    /// ```
    public static func cacheFirst(maxAge: Duration? = nil, maxStale: Duration) -> ReadPolicy {
        ReadPolicy(kind: .cacheFirst, maxAge: maxAge, maxStale: maxStale)
    }
    /// The cached value at once when there is one, then the network's (stale-while-revalidate).
    public static let cacheThenNetwork = ReadPolicy(kind: .cacheThenNetwork)
    /// The cached value at once when there is one, then the network's only when that value is not fresh: older
    /// than `maxAge`, or invalidated (stale-while-revalidate with a time during which a value needs no refetch).
    public static func cacheThenNetwork(maxAge: Duration) -> ReadPolicy {
        ReadPolicy(kind: .cacheThenNetwork, maxAge: maxAge)
    }
    /// The network, else the cache.
    public static let networkFirst = ReadPolicy(kind: .networkFirst)
    /// The cache only, whatever its age or invalidation; a miss fails with ``CacheMiss/absent``.
    public static let cacheOnly = ReadPolicy(kind: .cacheOnly)
    /// The network only: the cache is written, and read only when the fetch fails (the cached value is then the
    /// answer, with the fetch's error attached).
    public static let networkOnly = ReadPolicy(kind: .networkOnly)
}
