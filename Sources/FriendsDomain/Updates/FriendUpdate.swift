import Foundation
import Loading

/// A change to the friends list, pushed by the server.
public enum FriendUpdate: Equatable, Sendable {
    /// A friend was added or changed: replace the one with the same id, or append it.
    case upsert(Friend)
    /// The friend with this id is gone.
    case remove(id: Friend.ID)

    /// Decodes the update a server-sent event carries: `upsert` with a friend as data, `remove` with
    /// `{"id": "..."}`. Returns `nil` for other event types and for data that does not decode.
    public init?(_ event: ServerSentEvent) {
        let data = Data(event.data.utf8)
        switch event.type {
        case "upsert":
            guard let friend = try? Friend.makeDecoder().decode(Friend.self, from: data) else { return nil }
            self = .upsert(friend)
        case "remove":
            struct Removal: Decodable { let id: String }
            guard let removal = try? JSONDecoder().decode(Removal.self, from: data) else { return nil }
            self = .remove(id: removal.id)
        default:
            return nil
        }
    }
}

/// A source of live friend updates, whatever the transport: server-sent events here, a WebSocket on Apple
/// platforms, a test double in tests.
public protocol FriendsUpdatesSource: Sendable {
    /// The updates, from the moment of subscription; cancelling the subscription closes the connection.
    func updates() -> EventStream<FriendUpdate, any Error>
}

extension Array where Element == Friend {
    /// The list after `update`: a known id replaced in place, an unknown one appended, a removed one dropped.
    public func applying(_ update: FriendUpdate) -> [Friend] {
        var friends = self
        switch update {
        case .upsert(let friend):
            if let index = friends.firstIndex(where: { $0.id == friend.id }) {
                friends[index] = friend
            } else {
                friends.append(friend)
            }
        case .remove(let id):
            friends.removeAll { $0.id == id }
        }
        return friends
    }
}
