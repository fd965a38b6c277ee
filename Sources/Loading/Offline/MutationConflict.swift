/// How a ``MutationQueue`` treats a mutation the server answers with a conflict: a stale edit refused with the
/// server's current copy (HTTP 409 or 412 with a body, an `If-Match` that failed).
///
/// ```swift
/// let conflicts = MutationConflicts<[String], String>(  // a list, and the item a mutation removes
///     serverCopy: { error, _ in (error as? Conflict)?.copy },
///     resolve: { conflict in conflict.serverCopy.contains(conflict.input) ? .rebase : .takeServerCopy })
/// ```
///
/// When `serverCopy` finds a copy in a failure, the queue first confirms that copy as the key's value (written to
/// every level, shown in every key holding its entities), the mutation's change still shown over it; then `resolve`
/// answers what to do with the mutation.
///
/// A server that checks a precondition (an `If-Match` with the version the change was made against) refuses the same
/// request again: give `rebasing`, which makes the input anew against the server's copy (its version), and a
/// ``ConflictResolution/rebase`` sends that.
public struct MutationConflicts<Value: Sendable, Input: Sendable>: Sendable {
    let serverCopy: @Sendable (any Error, _ confirmed: Value?) -> Value?
    let rebasing: (@Sendable (Input, Value) -> Input)?
    let resolve: @Sendable (MutationConflict<Value, Input>) -> ConflictResolution<Input>

    /// Creates the conflict step of a queue.
    /// - Parameters:
    ///   - serverCopy: the server's copy of the key's value that a failure of `send` carries, decoded; `nil` when
    ///     the failure is not a conflict (then `isRefused` judges it). Asked before `isRefused`, with the key's
    ///     confirmed value (`nil` when the store holds none), for a server that answers with a part of it (the one
    ///     entity of a list that changed): the copy is then that value with the part replaced.
    ///   - rebasing: the input made again against the server's copy, for a ``ConflictResolution/rebase`` (the
    ///     copy's version as its precondition); `nil`: the input is sent again as it is.
    ///   - resolve: what to do with a mutation that met a conflict; called outside every lock, once per conflict.
    public init(
        serverCopy: @escaping @Sendable (any Error, _ confirmed: Value?) -> Value?,
        rebasing: (@Sendable (Input, Value) -> Input)? = nil,
        resolve: @escaping @Sendable (MutationConflict<Value, Input>) -> ConflictResolution<Input>
    ) {
        self.serverCopy = serverCopy
        self.rebasing = rebasing
        self.resolve = resolve
    }
}

/// A mutation the server answered with a conflict, as ``MutationConflicts`` hands it to the app.
public struct MutationConflict<Value: Sendable, Input: Sendable>: Sendable {
    /// The mutation's id.
    public let id: String
    /// What the mutation does.
    public let input: Input
    /// The server's copy of the key's value, which the store now holds under the mutation's change.
    public let serverCopy: Value
    /// What the key showed when the server answered: the value the user saw, the change applied.
    public let shown: Value?
    /// The failure that carried the conflict.
    public let error: any Error
}

/// What a ``MutationQueue`` does with a mutation that met a conflict.
public enum ConflictResolution<Input: Sendable>: Sendable {
    /// Apply the change again over the server's copy, show it, and send it again (a new attempt, with an idempotency
    /// key of its own: see ``StoredMutation/idempotencyKey``), made anew against the copy when the queue's
    /// ``MutationConflicts`` has `rebasing`.
    case rebase
    /// Undo this change alone and keep the server's copy: the mutation ends refused with
    /// ``MutationConflictError/replacedByServerCopy``.
    case takeServerCopy
    /// Replace the mutation's input with one the app computed from both copies (for the same key), show it over the
    /// server's copy, and send it (a new attempt, with an idempotency key of its own).
    case merge(Input)
    /// Leave the mutation waiting (``PendingMutation/awaitsResolution`` in ``MutationQueue/pending``) until the app
    /// answers with ``MutationQueue/resolveConflict(_:with:)``; kept so across restarts. Nothing after it is sent
    /// meanwhile.
    case ask
}

/// How a conflict of a ``MutationQueue`` ended without the mutation being sent again, or why it could not be resolved.
public enum MutationConflictError: Error, Equatable, CustomStringConvertible {
    /// ``MutationQueue/resolveConflict(_:with:)`` named a mutation that waits for no resolution (settled, unknown, or
    /// not in conflict).
    case noConflict(id: String)
    /// The server answered the mutation with a conflict, resolved by keeping the server's copy
    /// (``ConflictResolution/takeServerCopy``): the change was undone.
    case replacedByServerCopy

    public var description: String {
        switch self {
        case .noConflict(let id): "The change \(id) waits for no conflict to be resolved."
        case .replacedByServerCopy:
            "The change was undone: the server had changed the same data, and its copy was kept."
        }
    }
}
