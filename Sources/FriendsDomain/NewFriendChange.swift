import Foundation
import Loading

/// A change of a friend added on this device: its creation, under a temporary id until the server gives its own, or
/// its removal before or after that (see ``FriendsComposer/addFriend(named:completion:)``).
public enum NewFriendChange: Codable, Equatable, Sendable {
    /// The friend added; its id is temporary (it starts with ``temporaryIDPrefix``).
    case add(Friend)
    /// The added friend with this id removed.
    case delete(Friend.ID)

    /// How every temporary id starts: an id the server never gives.
    public static let temporaryIDPrefix = "local-"

    /// Whether `id` is a temporary one, given by ``FriendsComposer/addFriend(named:completion:)``.
    public static func isTemporary(_ id: Friend.ID) -> Bool {
        id.hasPrefix(temporaryIDPrefix)
    }

    /// The friend's id in the change.
    var friendID: Friend.ID {
        switch self {
        case .add(let friend): friend.id
        case .delete(let id): id
        }
    }

    /// The change with its friend's id replaced, when `serverID` knows it; `nil` when it does not.
    func replacingIDs(_ serverID: (String) -> String?) -> NewFriendChange? {
        guard let id = serverID(friendID) else { return nil }
        switch self {
        case .add(var friend):
            friend.id = id
            return .add(friend)
        case .delete:
            return .delete(id)
        }
    }

    /// `list` with each id `serverID` knows replaced: what the queued changes show once rewritten with the ids the
    /// server gave. A friend stands once, where it stands last (as an addition places it), should the server's copy
    /// be listed already.
    static func replacingIDs(in list: [Friend], _ serverID: (String) -> String?) -> [Friend] {
        let renamed = list.map { friend in
            var friend = friend
            friend.id = serverID(friend.id) ?? friend.id
            return friend
        }
        var seen = Set<Friend.ID>()
        return renamed.reversed().filter { seen.insert($0.id).inserted }.reversed()
    }

    /// The list with the change made: the friend added last (once), or removed.
    func applied(to list: [Friend]?) -> [Friend]? {
        switch self {
        case .add(let friend):
            let others = (list ?? []).filter { $0.id != friend.id }
            return others + [friend]
        case .delete(let id):
            return list?.filter { $0.id != id }
        }
    }
}
