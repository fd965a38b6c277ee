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
    /// The failure of its last attempt, while it waits to be sent again.
    public let lastError: (any Error)?
}

/// A mutation as a ``MutationStorage`` keeps it: enough to show it again and send it again after a restart.
public struct StoredMutation<Input: Sendable>: Sendable {
    /// The mutation's identity and idempotency key.
    public let id: String
    /// Its place in the queue: mutations are sent in increasing order.
    public let sequence: Int
    /// What the mutation does.
    public let input: Input
    /// When it was made.
    public let createdAt: Date
    /// How many times it was sent.
    public var attempts: Int

    /// Creates a stored mutation.
    public init(id: String, sequence: Int, input: Input, createdAt: Date, attempts: Int) {
        self.id = id
        self.sequence = sequence
        self.input = input
        self.createdAt = createdAt
        self.attempts = attempts
    }
}

extension StoredMutation: Codable where Input: Codable {}
extension StoredMutation: Equatable where Input: Equatable {}
