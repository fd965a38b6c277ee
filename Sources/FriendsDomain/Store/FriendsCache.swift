import Foundation
import Loading

/// The keys of the friends ``Store``: the user's friends list. A friend by id is read from that list (see
/// ``FriendsComposer/friend(id:)``), so that one value holds every friend and nothing can disagree with it.
public enum FriendsKey: Hashable, Sendable {
    /// The whole friends list.
    case all
}

/// A ``FriendsStore`` (memory, the SQLite database) as a level of a `Store`: a keyed cache of the friends list.
///
/// ```swift
/// let database = FriendsCache(store: SQLiteFriendsStore(fileURL: url), expiry: .maxAge(.seconds(86_400)))
/// let store = Store(
///     levels: [.cache(database, name: "database")],
///     fetch: LoaderFamily { (_: FriendsKey) in remote })
/// ```
/// A read misses with `CacheMiss.absent` when nothing is stored, and with `CacheMiss.expired(savedAt:)` when what
/// is stored has expired (it is deleted). A database that cannot be read at all (corrupt, truncated, not a database)
/// is deleted and created anew, `onReset` is told why, and the read fails with the error: the next save heals the
/// cache instead of failing for ever. Other read failures (a locked file) delete nothing.
public struct FriendsCache: KeyedCache {
    private let store: any FriendsStore
    private let expiry: CacheExpiry<[Friend]>
    private let now: @Sendable () -> Date
    private let onReset: @Sendable (any Error) -> Void

    /// Creates the level over `store`; what it holds expires as `expiry` says, judged against `now`.
    public init(
        store: any FriendsStore,
        expiry: CacheExpiry<[Friend]> = .never,
        now: @escaping @Sendable () -> Date = Date.init,
        onReset: @escaping @Sendable (any Error) -> Void = { _ in }
    ) {
        self.store = store
        self.expiry = expiry
        self.now = now
        self.onReset = onReset
    }

    /// Reads the stored list with its save date.
    public func value(
        for key: FriendsKey, completion: @escaping @Sendable (Result<CachedValue<[Friend]>, any Error>) -> Void
    ) {
        let (store, expiry, now, onReset) = (store, expiry, now, onReset)
        store.retrieve { result in
            switch result {
            case .success(nil):
                completion(.failure(CacheMiss.absent))
            case .success(let cached?):
                guard expiry.isFresh(cached.friends, savedAt: cached.timestamp, now: now()) else {
                    return store.deleteAll { _ in
                        completion(.failure(CacheMiss.expired(savedAt: cached.timestamp)))
                    }
                }
                completion(.success(CachedValue(cached.friends, savedAt: cached.timestamp)))
            case .failure(let error as SQLiteError) where error.isUnreadableDatabase:
                store.deleteAll { outcome in
                    if case .success = outcome { onReset(error) }
                    completion(.failure(error))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Replaces the stored list with `friends`, stamped with the current date.
    public func save(
        _ friends: [Friend], for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        store.replaceAll(with: friends, timestamp: now(), completion: completion)
    }

    /// Removes the stored list.
    public func removeValue(for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        store.deleteAll(completion: completion)
    }

    /// Removes the stored list.
    public func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        store.deleteAll(completion: completion)
    }
}
