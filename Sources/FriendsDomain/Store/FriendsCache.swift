import Foundation
import Loading

/// The keys of the friends ``Store``: the user's friends list. A friend by id is read from that list (see
/// ``FriendsComposer/friend(id:)``), so that one value holds every friend and nothing can disagree with it.
public enum FriendsKey: Hashable, Sendable, Codable {
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
///
/// A save writes only what changed since the list the cache last read or saved (``FriendsChanges``, applied by
/// ``FriendsStore/apply(_:timestamp:completion:)``; an ``InMemoryFriendsStore``, one process's alone, takes the whole
/// list at once): two processes over one database file (an app and its
/// extension) each save their own changes, and neither undoes the other's. Each sees the other's on its next read of
/// the file (a launch, or a read the store makes).
public struct FriendsCache: KeyedCache {
    private let store: any FriendsStore
    /// How long the stored list stays fresh.
    public let expiry: CacheExpiry<[Friend]>
    private let now: @Sendable () -> Date
    private let onReset: @Sendable (any Error) -> Void
    /// The list the store holds as this cache last read or wrote it (`nil`: unknown), and a count of the writes
    /// decided (a read that started before a write does not replace what the write made known).
    private let known = Locked<(friends: [Friend]?, writes: Int)>((nil, 0))

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
        let (store, expiry, now, onReset, known) = (store, expiry, now, onReset, known)
        let writes = known.withLock { $0.writes }
        store.retrieve { result in
            switch result {
            case .success(nil):
                Self.learn([], if: writes, in: known)
                completion(.failure(CacheMiss.absent))
            case .success(let cached?):
                guard expiry.isFresh(cached.friends, savedAt: cached.timestamp, now: now()) else {
                    Self.learn([], if: writes, in: known)
                    return store.deleteAll { _ in
                        completion(.failure(CacheMiss.expired(savedAt: cached.timestamp)))
                    }
                }
                Self.learn(cached.friends, if: writes, in: known)
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

    /// Saves `friends`, stamped with the current date: what changed since the list this cache last read or saved
    /// (everything when it knows none).
    public func save(
        _ friends: [Friend], for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        save(friends, for: key, savedAt: now(), completion: completion)
    }

    /// Saves `friends` as saved at `savedAt` (a list the store copies from the database to memory keeps its age):
    /// what changed since the list this cache last read or saved (everything when it knows none).
    public func save(
        _ friends: [Friend], for key: FriendsKey, savedAt: Date,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let known = known
        // An in-memory store is this process's alone: it takes the whole list, and the changes need not be found.
        let isWholeList = store is InMemoryFriendsStore
        let before = known.withLock { known in
            defer { known = (friends, known.writes + 1) }
            return known.friends
        }
        let landed: @Sendable (Result<Void, any Error>) -> Void = { result in
            // A failed write leaves the store as it was, which this cache no longer knows: the next save replaces all.
            if case .failure = result { known.withLock { $0 = (nil, $0.writes + 1) } }
            completion(result)
        }
        guard !isWholeList else { return store.replaceAll(with: friends, timestamp: savedAt, completion: landed) }
        store.apply(FriendsChanges(from: before, to: friends), timestamp: savedAt, completion: landed)
    }

    /// Removes the stored list.
    public func removeValue(for key: FriendsKey, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        removeAll(completion: completion)
    }

    /// Removes the stored list.
    public func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let known = known
        known.withLock { $0 = ([], $0.writes + 1) }
        store.deleteAll { result in
            if case .failure = result { known.withLock { $0 = (nil, $0.writes + 1) } }
            completion(result)
        }
    }

    /// Takes `friends` as what the store holds, unless a write was decided since the read began.
    private static func learn(
        _ friends: [Friend], if writes: Int, in known: Locked<(friends: [Friend]?, writes: Int)>
    ) {
        let replaced = known.withLock { known -> [Friend]? in
            guard known.writes == writes else { return nil }
            defer { known.friends = friends }
            return known.friends
        }
        withExtendedLifetime(replaced) {}  // released after unlocking
    }
}
