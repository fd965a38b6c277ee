#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A mutation waiting in a ``MutationQueue``, as a screen lists it: its input, where it stands, and how often it was
/// sent.
public struct PendingMutation<Input: Sendable>: Sendable, Identifiable {
    /// Where a pending mutation stands.
    public enum Status: Sendable, Equatable {
        /// Waiting for its turn, the network, or its next retry (see ``PendingMutation/lastError``).
        case waiting
        /// Sent; its answer has not come yet.
        case sending
    }

    /// The mutation's identity, also sent with each attempt as its idempotency key.
    public let id: String
    /// What the mutation does.
    public let input: Input
    /// When it was made.
    public let createdAt: Date
    /// Where it stands.
    public let status: Status
    /// How many times it was sent, across launches.
    public let attempts: Int
    /// The failure of its last attempt, while it waits to be sent again (or the conflict, while it
    /// ``awaitsResolution``; after a restart, `nil`).
    public let lastError: (any Error)?
    /// Whether the server answered with a conflict that the app has not resolved yet (``ConflictResolution/ask``):
    /// it waits, and nothing after it is sent, until ``MutationQueue/resolveConflict(_:with:)`` answers.
    public let awaitsResolution: Bool
}

/// A mutation as a ``MutationStorage`` keeps it: enough to show it again and send it again after a restart.
public struct StoredMutation<Input: Sendable>: Sendable {
    /// The mutation's identity, and its idempotency key until a conflict was resolved (see ``idempotencyKey``).
    public let id: String
    /// Its place in the queue: mutations are sent in increasing order.
    public let sequence: Int
    /// What the mutation does (rewritten when an item it names was given its server id).
    public internal(set) var input: Input
    /// When it was made.
    public let createdAt: Date
    /// How many times it was sent.
    public var attempts: Int
    /// For a creation (see ``OfflineCreation``): the id the server gave the item, once it answered.
    public var serverID: String?
    /// How many conflicts were resolved by sending the mutation again (``ConflictResolution/rebase`` or
    /// ``ConflictResolution/merge(_:)``): each such send is a new request, with an idempotency key of its own.
    public var resends: Int
    /// Whether the server answered with a conflict that the app has not resolved yet (``ConflictResolution/ask``).
    public var awaitsResolution: Bool

    /// The idempotency key its attempts carry: its id, then a key of its own after each resend over a conflict (a
    /// server that remembers the answer of a key would answer the resend with the same conflict).
    public var idempotencyKey: String {
        resends == 0 ? id : "\(id).\(resends)"
    }

    /// Creates a stored mutation.
    public init(
        id: String, sequence: Int, input: Input, createdAt: Date, attempts: Int, serverID: String? = nil,
        resends: Int = 0, awaitsResolution: Bool = false
    ) {
        self.id = id
        self.sequence = sequence
        self.input = input
        self.createdAt = createdAt
        self.attempts = attempts
        self.serverID = serverID
        self.resends = resends
        self.awaitsResolution = awaitsResolution
    }
}

extension StoredMutation: Codable where Input: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, sequence, input, createdAt, attempts, serverID, resends, awaitsResolution
    }

    /// Decodes a stored mutation; one kept by an earlier version (without the conflict's fields) has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            id: container.decode(String.self, forKey: .id), sequence: container.decode(Int.self, forKey: .sequence),
            input: container.decode(Input.self, forKey: .input),
            createdAt: container.decode(Date.self, forKey: .createdAt),
            attempts: container.decode(Int.self, forKey: .attempts),
            serverID: container.decodeIfPresent(String.self, forKey: .serverID),
            resends: container.decodeIfPresent(Int.self, forKey: .resends) ?? 0,
            awaitsResolution: container.decodeIfPresent(Bool.self, forKey: .awaitsResolution) ?? false)
    }

    /// Encodes the stored mutation.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(input, forKey: .input)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(attempts, forKey: .attempts)
        try container.encodeIfPresent(serverID, forKey: .serverID)
        try container.encode(resends, forKey: .resends)
        try container.encode(awaitsResolution, forKey: .awaitsResolution)
    }
}
extension StoredMutation: Equatable where Input: Equatable {}

extension StoredMutation {
    /// The mutation with its input as `any Sendable`, as a queue's ledger keeps it.
    var erased: StoredMutation<any Sendable> {
        StoredMutation<any Sendable>(
            id: id, sequence: sequence, input: input, createdAt: createdAt, attempts: attempts, serverID: serverID,
            resends: resends, awaitsResolution: awaitsResolution)
    }

    /// A mutation a queue's ledger kept (see ``erased``), its input of the queue's type again.
    init(_ erased: StoredMutation<any Sendable>) {
        self.init(
            id: erased.id, sequence: erased.sequence, input: typedInput(erased.input), createdAt: erased.createdAt,
            attempts: erased.attempts, serverID: erased.serverID, resends: erased.resends,
            awaitsResolution: erased.awaitsResolution)
    }
}

/// How a mutation of a ``MutationQueue`` ended, as its `onSettled` is told.
public struct SettledMutation<Input: Sendable>: Sendable {
    /// How a mutation ended.
    public enum Outcome: Sendable, CustomStringConvertible {
        /// The server accepted it, and the store confirmed it.
        case accepted
        /// The server refused it (`isRefused`): it was undone.
        case refused(any Error)
        /// ``MutationQueue/discard(_:)`` gave it up: it was undone and never sent again.
        case discarded
        /// A logout (``Store/clear(completion:)``) dropped it.
        case cleared
        /// Another process sending from the same storage sent it; its answer is that process's to tell. It was undone
        /// here, and its key invalidated.
        case sentByAnotherProcess

        public var description: String {
            switch self {
            case .accepted: "accepted"
            case .refused(let error): "refused(\(error))"
            case .discarded: "discarded"
            case .cleared: "cleared"
            case .sentByAnotherProcess: "sentByAnotherProcess"
            }
        }
    }

    /// The mutation's id.
    public let id: String
    /// What the mutation did.
    public let input: Input
    /// How it ended.
    public let outcome: Outcome
    /// For an accepted creation (see ``OfflineCreation``): the id the server gave the item.
    public let serverID: String?

    init(id: String, input: Input, outcome: Outcome, serverID: String? = nil) {
        self.id = id
        self.input = input
        self.outcome = outcome
        self.serverID = serverID
    }
}

/// Why a ``MutationQueue`` settled a mutation without an answer of its own from the server.
public enum MutationQueueError: Error, Equatable, CustomStringConvertible {
    /// Another process sending from the same storage (an app and its extension) sent the mutation; how the server
    /// answered is that process's to tell.
    case sentByAnotherProcess
    /// The mutation names an item created offline whose creation the server refused: it was undone with the
    /// creation, unsent.
    case creationRefused(temporaryID: String)

    public var description: String {
        switch self {
        case .sentByAnotherProcess:
            "The change was sent by another process using the same storage; that process received the server's answer."
        case .creationRefused(let temporaryID):
            "The change was not sent: the server refused to create the item \(temporaryID) it names."
        }
    }
}

extension PendingMutation {
    /// A mutation as a queue's ledger lists it (its input as `any Sendable`), its input of the queue's type again.
    init(_ erased: PendingMutation<any Sendable>) {
        let status: Status =
            switch erased.status {
            case .waiting: .waiting
            case .sending: .sending
            }
        self.init(
            id: erased.id, input: typedInput(erased.input), createdAt: erased.createdAt, status: status,
            attempts: erased.attempts, lastError: erased.lastError, awaitsResolution: erased.awaitsResolution)
    }
}

/// An input a queue's ledger kept as `any Sendable`, of the queue's input type again.
func typedInput<Input>(_ kept: any Sendable) -> Input {
    guard let input = kept as? Input else {
        preconditionFailure("A queue's mutation holds an input of another type than the queue's")
    }
    return input
}
