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

    /// Applies `changes` at once (the database: in one transaction), saved at `timestamp`: the rows of friends the
    /// changes do not name are left as they are, so that two writers of one file (an app and its extension) never
    /// undo each other's changes. The default replaces everything with `changes.friends`.
    func apply(
        _ changes: FriendsChanges, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
}

extension FriendsStore {
    /// Reads what is stored, applies `changes` to it, and replaces everything with the result: for a store only one
    /// writer uses at a time (memory). A store shared by writers applies them at once instead (SQLite: in one
    /// transaction).
    public func apply(
        _ changes: FriendsChanges, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        retrieve { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let cached):
                replaceAll(
                    with: changes.applied(to: cached?.friends ?? []), timestamp: timestamp, completion: completion)
            }
        }
    }
}

/// What saving a friends list changes, against the list the saver knew before (read or saved last): the friends to
/// insert or update, each with its place in the new list, the friends that only moved, and the ids to delete.
/// Without a list known before, the save replaces everything.
///
/// When the friends of the old list keep their order and new friends come after them (what live updates, deletes and
/// edits make), ``keepsOrder`` is set and nothing moves: a store keeps the places it stored and puts new friends after
/// the last, so that removing one friend from the top of a long list does not rewrite every row.
///
/// ```swift
/// let changes = FriendsChanges(from: [ada, grace], to: [grace, linus])
/// // deletions: Ada's id; upserts: Linus (new, last); nothing moves
/// ```
public struct FriendsChanges: Sendable {
    /// A friend to insert or update, at `position` in the new list.
    public struct Upsert: Equatable, Sendable {
        /// The friend as saved.
        public let friend: Friend
        /// Its index in the new list.
        public let position: Int

        /// Creates an upsert of `friend` at `position`.
        public init(friend: Friend, position: Int) {
            self.friend = friend
            self.position = position
        }
    }

    /// The whole new list, in order (one per id).
    public let friends: [Friend]
    /// The friends that are new or changed.
    public let upserts: [Upsert]
    /// The friends that are unchanged but at another place: only their position is saved, so that a change another
    /// writer made to them stays.
    public let moves: [Upsert]
    /// The ids the new list no longer has.
    public let deletions: [Friend.ID]
    /// Whether the save replaces everything (nothing was known before).
    public let replacesAll: Bool
    /// Whether the friends of the old list keep their order, and new friends come after them: places stay as stored,
    /// ``moves`` is empty, and new friends go after the last row, in order.
    public let keepsOrder: Bool

    /// The changes from `old` (`nil`: unknown) to `new`.
    public init(from old: [Friend]?, to new: [Friend]) {
        let new = new.deduplicatedByID()
        friends = new
        guard let old else {
            upserts = new.enumerated().map { Upsert(friend: $1, position: $0) }
            moves = []
            deletions = []
            replacesAll = true
            keepsOrder = false
            return
        }
        var before: [Friend.ID: (friend: Friend, position: Int)] = [:]
        for (position, friend) in old.enumerated() { before[friend.id] = (friend, position) }
        // The old friends keep their order, and new ones come last: nothing moves.
        var keepsOrder = true
        var lastOld = -1
        var sawNew = false
        for friend in new {
            guard let known = before[friend.id] else {
                sawNew = true
                continue
            }
            if sawNew || known.position < lastOld {
                keepsOrder = false
                break
            }
            lastOld = known.position
        }
        var upserts: [Upsert] = []
        var moves: [Upsert] = []
        for (position, friend) in new.enumerated() {
            guard let known = before[friend.id], known.friend == friend else {
                upserts.append(Upsert(friend: friend, position: position))
                continue
            }
            if !keepsOrder, known.position != position { moves.append(Upsert(friend: friend, position: position)) }
        }
        self.upserts = upserts
        self.moves = moves
        self.keepsOrder = keepsOrder
        let kept = Set(new.map(\.id))
        deletions = old.map(\.id).filter { !kept.contains($0) }
        replacesAll = false
    }

    /// `list` with the changes applied, as a database applies them: deleted ids removed, upserts replacing by id
    /// (or added), upserts and moves taking their positions; ordered by position, then by the order rows were
    /// first stored.
    public func applied(to list: [Friend]) -> [Friend] {
        guard !replacesAll else { return friends }
        if keepsOrder {
            // Places stay; updated friends stay where they are, new ones go last.
            let deleted = Set(deletions)
            var rows = list.filter { !deleted.contains($0.id) }
            var index: [Friend.ID: Int] = [:]
            for (position, friend) in rows.enumerated() { index[friend.id] = position }
            for upsert in upserts {
                if let position = index[upsert.friend.id] {
                    rows[position] = upsert.friend
                } else {
                    index[upsert.friend.id] = rows.count
                    rows.append(upsert.friend)
                }
            }
            return rows
        }
        var rows: [Friend.ID: (friend: Friend, position: Int, order: Int)] = [:]
        for (index, friend) in list.enumerated() { rows[friend.id] = (friend, index, index) }
        for id in deletions { rows[id] = nil }
        for upsert in upserts {
            let order = rows[upsert.friend.id]?.order ?? list.count + rows.count
            rows[upsert.friend.id] = (upsert.friend, upsert.position, order)
        }
        for move in moves where rows[move.friend.id] != nil { rows[move.friend.id]!.position = move.position }
        return rows.values.sorted { ($0.position, $0.order) < ($1.position, $1.order) }.map(\.friend)
    }
}
