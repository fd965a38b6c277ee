import Foundation

/// A rename of a friend made on this device, against the friend as the app showed it: what
/// ``FriendsComposer/pendingRenames`` keeps on disk and sends.
public struct FriendRename: Codable, Hashable, Sendable {
    /// The friend renamed.
    public var friendID: Friend.ID
    /// The new name.
    public var name: String
    /// The friend's ``Friend/updatedAt`` as the rename saw it: the server refuses the rename, with its own copy, when
    /// the friend changed since (``FriendRenameConflict``).
    public var basedOn: Date

    /// Creates a rename of the friend `friendID` to `name`, made against the friend as it was at `basedOn`.
    public init(friendID: Friend.ID, name: String, basedOn: Date) {
        self.friendID = friendID
        self.name = name
        self.basedOn = basedOn
    }

    /// `list` with the friend renamed; as it is when the friend is not in it.
    func applied(to list: [Friend]?) -> [Friend]? {
        list?.map { friend in
            guard friend.id == friendID else { return friend }
            var renamed = friend
            renamed.name = name
            return renamed
        }
    }

    /// The rename made again against the friend as `list` holds it (its date); as it is when the friend is not there.
    func rebased(on list: [Friend]) -> FriendRename {
        guard let friend = list.first(where: { $0.id == friendID }) else { return self }
        return FriendRename(friendID: friendID, name: name, basedOn: friend.updatedAt)
    }
}

/// The server refused a rename: the friend changed there since the rename's ``FriendRename/basedOn``. `current` is the
/// friend as the server holds it.
public struct FriendRenameConflict: Error, Equatable, CustomStringConvertible, LocalizedError {
    /// The friend as the server holds it now.
    public let current: Friend

    /// Creates the conflict, with the server's friend.
    public init(current: Friend) {
        self.current = current
    }

    public var description: String {
        "The friend was changed on the server meanwhile (now named \(current.name)): the rename was made against an "
            + "older copy."
    }

    public var errorDescription: String? { description }

    /// `list` with the server's friend in place of its copy there (added when the list does not hold it).
    func replacing(in list: [Friend]?) -> [Friend] {
        guard let list, list.contains(where: { $0.id == current.id }) else { return (list ?? []) + [current] }
        return list.map { $0.id == current.id ? current : $0 }
    }
}

extension Friend {
    /// The friend's version as an entity tag (its ``updatedAt`` in milliseconds, quoted): what a rename sends in
    /// `If-Match`, and what the server compares with its own friend's.
    public var entityTag: String {
        "\"\(Int((updatedAt.timeIntervalSince1970 * 1_000).rounded(.down)))\""
    }
}
