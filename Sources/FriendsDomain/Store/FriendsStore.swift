import Foundation

/// The friends a store holds, with the moment they were saved (for the cache policy).
public struct CachedFriends: Equatable, Sendable {
    /// The friends, in the order they were saved.
    public var friends: [Friend]
    /// When the list was last written as a whole.
    public var timestamp: Date

    /// Creates a snapshot.
    public init(friends: [Friend], timestamp: Date) {
        self.friends = friends
        self.timestamp = timestamp
    }
}

/// Somewhere friends are kept: memory, a database. Every call completes exactly once; a failed write leaves what
/// was stored before intact. Implementations are safe to call from any thread.
///
/// The same contract test suite (`FriendsStoreSpecs` in the tests) runs against every implementation.
public protocol FriendsStore: Sendable {
    /// Reads what is stored: `nil` when nothing is.
    func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void)

    /// Replaces everything with `friends` (one per id: `friends.deduplicatedByID()`), saved at `timestamp`.
    func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Replaces the friend with the same id, or appends `friend` if the id is unknown; `timestamp` becomes the
    /// save time.
    func upsert(_ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Removes the friend with `id`, if there is one.
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Removes everything, timestamp included.
    func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
}
