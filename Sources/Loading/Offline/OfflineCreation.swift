/// How a ``MutationQueue`` sends the mutations that create an item while offline, and follows the id the server
/// gives it.
///
/// An item created offline has no server id yet: the app gives it a temporary one (any string the server never
/// uses), shows it and edits it under that id. When the server accepts the creation, its answer is the item's
/// server id, and the queue replaces the temporary id with it everywhere it stands: in the store's value, in every
/// later queued mutation (in memory and in the storage), and in mutations enqueued later still under the old id (while
/// the process runs: a new one knows the ids of the creations still queued only, so keep the server's id where the
/// app keeps the item).
///
/// ```swift
/// let creation = OfflineCreation<ItemChange>(
///     temporaryID: { change in change.createdID },  // .add(id:name:) -> its temporary id
///     replacingIDs: { change, serverID in change.replacingIDs(serverID) },
///     send: { change, idempotencyKey in api.create(change, idempotencyKey: idempotencyKey) })
/// ```
///
/// - **A kill loses nothing**: the server's id is saved with the creation before any mutation is rewritten, and the
///   creation leaves the storage only after them; a launch finishes the rewrite without sending the creation again.
///   Killed before that save, the creation is sent again with the same idempotency key: a server that honours it
///   answers the same id.
/// - **A refused creation is undone alone**, with the queued mutations that name its item (their completions get
///   ``MutationQueueError/creationRefused(temporaryID:)``); the other mutations stay and are sent.
/// - The store key of a mutation is read once, when it is shown: key mutations by something an id rewrite keeps
///   (the list they change), not by the item's temporary id.
/// - A creation's answer shows its key with the server's id. Given the queue's `replacingIDsInValue`, the store
///   rewrites what the key showed, and the answer costs the same however many changes wait behind it; without it,
///   the changes pending on the key are applied again, as the changes after a refused one are. Rewriting the
///   mutations costs only those naming the item.
public struct OfflineCreation<Input: Sendable>: Sendable {
    let temporaryID: @Sendable (Input) -> String?
    let replacingIDs: @Sendable (Input, (String) -> String?) -> Input?
    let send: @Sendable (Input, String) -> AnyLoader<String>

    /// Describes the creations of a queue's mutations.
    /// - Parameters:
    ///   - temporaryID: the temporary id of the item a mutation creates; `nil` for a mutation that creates nothing
    ///     (it is sent with the queue's `send`).
    ///   - replacingIDs: the mutation with each id that `serverID` knows replaced by the id it returns; `nil` when
    ///     it knows none of them (the mutation is then left as it is). It asks `serverID` about every id the
    ///     mutation names: the queue learns from it which mutations name an item.
    ///   - send: sends a creation to the server with its idempotency key; the load's success is the server's id of
    ///     the created item, any failure is judged by the queue's `isRefused`.
    public init<Creator: Loader<String>>(
        temporaryID: @escaping @Sendable (Input) -> String?,
        replacingIDs: @escaping @Sendable (Input, _ serverID: (String) -> String?) -> Input?,
        send: @escaping @Sendable (Input, _ idempotencyKey: String) -> Creator
    ) {
        self.temporaryID = temporaryID
        self.replacingIDs = replacingIDs
        self.send = { input, idempotencyKey in AnyLoader(send(input, idempotencyKey)) }
    }

    /// `input` with temporary id `temporary` replaced by `server`; `nil` when it does not name it.
    func replacing(_ temporary: String, with server: String, in input: Input) -> Input? {
        replacingIDs(input) { $0 == temporary ? server : nil }
    }

    /// `input` with the ids `known` holds replaced (`nil` when it names none of them), and the ids it names then.
    func rewriting(_ input: Input, with known: [String: String]) -> (input: Input?, names: [String]) {
        var names: [String] = []
        let rewritten = replacingIDs(input) { id in
            let server = known[id]
            names.append(server ?? id)
            return server
        }
        return (rewritten, names)
    }
}
