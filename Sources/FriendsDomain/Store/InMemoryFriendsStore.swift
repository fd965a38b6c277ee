import Foundation
import Loading

/// A thread-safe friends store in memory: the first, fastest source of a composition.
public final class InMemoryFriendsStore: FriendsStore {
    private let cache = Locked<CachedFriends?>(nil)

    /// Creates an empty store, or one holding `initial`.
    public init(_ initial: CachedFriends? = nil) {
        cache.withLock { $0 = initial }
    }

    public func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void) {
        completion(.success(cache.withLock { $0 }))
    }

    public func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let replaced = cache.withLock { cache in
            defer { cache = CachedFriends(friends: friends.deduplicatedByID(), timestamp: timestamp) }
            return cache
        }
        withExtendedLifetime(replaced) {}  // what was stored is released after unlocking
        completion(.success(()))
    }

    public func upsert(
        _ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        cache.withLock { cache in
            var friends = cache?.friends ?? []
            if let index = friends.firstIndex(where: { $0.id == friend.id }) {
                friends[index] = friend
            } else {
                friends.append(friend)
            }
            cache = CachedFriends(friends: friends, timestamp: timestamp)
        }
        completion(.success(()))
    }

    public func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        cache.withLock { cache in
            cache?.friends.removeAll { $0.id == id }
        }
        completion(.success(()))
    }

    public func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let removed = cache.withLock { cache in
            defer { cache = nil }
            return cache
        }
        withExtendedLifetime(removed) {}
        completion(.success(()))
    }
}
