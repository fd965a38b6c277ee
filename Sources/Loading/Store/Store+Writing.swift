#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Confirms `value` for `key` (a live update, a local edit), writes it to every level and shows it. A debounced
    /// level gets it with the rest of its burst, when its timer fires or on ``flush(completion:)``.
    @inlinable
    public func write(_ value: Value, for key: Key) {
        engine.write(
            ValueBox(value), hash: key.hashValue, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) })
    }

    /// Replaces `key`'s confirmed value with `transform(value)` (a live update applied to a list, say), in order with
    /// every other change of the key: `transform` runs outside the lock, on the value the key has when its turn
    /// comes (read from the levels first when the store does not hold the key). Writes the result to every level
    /// (`nil` removes it from them; a debounced level gets it with the rest of its burst) and shows it. When the key
    /// has no value and `transform` makes none, nothing changes, except that a fetch in flight gets `transform`
    /// applied to the value it brings (a live update that arrives while the first load runs is kept). A read of the
    /// key made from inside `transform` does not wait for the change (which waits for it): it answers at once with
    /// the value `transform` is given, or fails with ``StoreError/changeInProgress`` when that is `nil`.
    public func update(_ key: Key, _ transform: @escaping @Sendable (Value?) -> Value?) {
        submit(.update(Self.erase(transform), reply: nil, replays: true), for: key)
    }

    /// ``update(_:_:)`` with the newer copies of entities the key holds, as a change of the value the store keeps:
    /// applied again to what a fetch of the key in flight brings when it `replays` (a live update), not when the
    /// copies are ones another key learned (what the fetch brings is learned later, and reaches the other keys in
    /// turn). The copies are the entities' as of their latest version `since`, which the key's confirmation reports.
    func updateEntities(of key: StoreKeyRef, _ change: @escaping Machine.Change, replays: Bool, since: Int) {
        engine.submit(.update(change, reply: nil, replays: replays, source: .entities(since: since)), of: key)
    }

    /// ``update(_:_:)`` with what the network brought (a page appended to a list), `change` made on the boxed values
    /// the store keeps (as ``erase(_:)`` makes them): written to every level at once; `reply` receives what the key
    /// shows once it is saved, or ``StoreError/discarded`` when a removal or a clear dropped the change.
    func updateFetched(_ key: Key, _ change: @escaping Machine.Change, reply: @escaping Machine.FetchCompletion) {
        submit(.update(change, reply: reply, replays: true), for: key)
    }

    /// Removes `key`'s value from the store and every level, at once: fetches and level reads started before confirm
    /// nothing, and writes and updates not yet applied are dropped.
    public func remove(_ key: Key) {
        let (effects, object) = lockedKeeping(key) { $0.remove($1) }
        engine.perform(effects, for: object)
    }

    /// Writes every debounced write waiting now, without waiting for its timer: what an app calls when it goes to
    /// the background, so that a burst of changes is not lost if the process is ended. Changes asked before the call
    /// are included. `completion` runs once the writes it issued have completed (or failed: see `onWriteFailure`);
    /// a level that runs its writes in order, as a database connection does, has then completed the earlier ones too.
    /// A store sharing a level with other processes (`sharing:`) has then recorded those writes in the journal too,
    /// for the other processes to learn.
    ///
    /// ```swift
    /// // When the app goes to the background:
    /// store.flush()
    /// ```
    public func flush(completion: @escaping @Sendable () -> Void = {}) {
        // With other processes over a level, once they can learn the writes too (their records are in the journal).
        var done = completion
        if let order = otherProcesses?.order { done = { order.whenRecorded(completion) } }
        let saved = Machine.SaveTicket(.run(done))
        for key in lockedKeys({ $0.keysToFlush() }) {
            saved.hold()
            submit(.flush(saved), for: key)
        }
        saved.release()
    }

    /// Writes every debounced write waiting now, and returns once the writes it issued have completed (or failed:
    /// see `onWriteFailure`), as ``flush(completion:)`` does. Cancelling the waiting task ends the wait at once; the
    /// writes go on.
    ///
    /// ```swift
    /// // Before the app is suspended:
    /// await store.flush()
    /// ```
    public func flush() async {
        _ = try? await AnyLoader<Void> { completion in
            self.flush { completion(.success(())) }
            return AnyCancellationToken {}
        }.load()
    }

    /// Lets go of the values the store keeps for keys no longer in use (see `keptValues` in
    /// ``init(levels:fetch:keptValues:maxAge:network:now:fetchContext:coordination:sharing:entities:onWriteFailure:events:)``): call it
    /// when the system asks for memory, beside emptying your memory levels (``MemoryCache/clear()``). Keys in use
    /// keep their values; a key let go of is read from its levels when it is asked for again.
    public func trimMemory() {
        locked { $0.dropKeptValues() }
    }

    /// Forgets everything (a logout): cancels pending optimistic changes (their commits are cancelled and their
    /// completions receive ``StoreError/cleared``) and debounced writes, empties every level, and shows every observed
    /// key as empty, before it returns. Nothing fetched, read or changed before the clear reappears after it. It never
    /// waits on the caller's thread: `completion` runs once every level has been emptied (or failed to be: see
    /// `onWriteFailure`) and every ``MutationQueue`` over the store forgot its mutations, storage included.
    public func clear(completion: @escaping @Sendable () -> Void = {}) {
        // The queues over the store stop starting work, and forget their mutations, before anything is cancelled;
        // one whose storage is saving forgets once the save landed, and the clear ends then: its caller never waits.
        // The store's two parts: its levels emptied, and the entities told (before a queue sends the next user's).
        let storePartEnded = clearObservers.clearBegins(storeParts: 2, ended: completion)
        engine.clear(completion: storePartEnded)
        engine.confirmations?.cleared()
        storePartEnded()
    }

    /// Forgets everything (a logout), as ``clear(completion:)`` does, and returns once every level has been emptied
    /// and every ``MutationQueue`` over the store forgot its mutations. A logout cannot be cancelled: cancelling the
    /// waiting task ends the wait at once, and the clear goes on.
    ///
    /// ```swift
    /// await store.clear()
    /// ```
    public func clear() async {
        _ = try? await AnyLoader<Void> { completion in
            self.clear { completion(.success(())) }
            return AnyCancellationToken {}
        }.load()
    }

    /// Shows `change` applied to `key`'s value at once, and sends it upstream with `commit`.
    ///
    /// The shown value is the confirmed value with every pending change applied in order. When `commit` succeeds,
    /// the change joins the confirmed value and is written to every level at once, debounced ones included; when it
    /// fails, only this change is undone, and changes made meanwhile stay. `completion` receives the commit's
    /// outcome: a success once the levels' writes have completed, a failure once the change is undone. Cancelling the
    /// returned token cancels the commit and undoes the change. Made while another change of the key runs, the change
    /// is shown after it. In a store sharing entities (`entities:`), a change that makes new copies of entities the
    /// key shows (a rename on a detail screen) shows them in every key holding them at once, with this one commit,
    /// and is undone in all of them when refused or cancelled, as ``SharedEntities/mutate(_:_:commit:completion:)``
    /// does.
    @discardableResult
    public func mutate<Commit: Loader>(
        _ key: Key,
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) -> any CancellationToken {
        if let entities = entityObserver {
            let origin: OriginChange = { [self] commit, completion in
                mutateHere(key, change, commit: commit, completion: completion)
            }
            let commit = AnyLoader(commit.map { _ in () })
            let token = entities.mutate(in: self, key, change, origin: origin, commit: commit, completion: completion)
            if let token { return token }
        }
        return mutateHere(key, change, commit: commit, completion: completion)
    }

    /// ``mutate(_:_:commit:completion:)`` of this key alone (the entities' change of one of the keys holding them).
    func mutateHere<Commit: Loader>(
        _ key: Key, _ change: @escaping @Sendable (Value?) -> Value?, commit: Commit,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> any CancellationToken {
        // Made with no condition, the change is always added.
        mutate(key, change, commit: commit, order: nil, unlessClearedSince: nil, completion: completion)!.undo
    }

    /// Shows `change` applied to `key`'s value at once, sends it upstream with `commit`, and returns once it is
    /// settled, as ``mutate(_:_:commit:completion:)`` does: once the confirmed value is saved to the levels, or,
    /// refused, throws the commit's error once the change is undone. Cancelling the task cancels the commit and undoes
    /// the change; this then throws `CancellationError`.
    ///
    /// ```swift
    /// try await friends.mutate("all", { ids in ids?.filter { $0 != "u3" } }, commit: api.deleteFriend("u3"))
    /// ```
    public func mutate<Commit: Loader>(
        _ key: Key, _ change: @escaping @Sendable (Value?) -> Value?, commit: Commit
    ) async throws {
        try await AnyLoader<Void> { completion in
            self.mutate(key, change, commit: commit, completion: completion)
        }.load()
    }

    /// ``mutate(_:_:commit:completion:)`` for a queue's change: placed by `order` among its queue's changes, and
    /// refused (`nil`, nothing shown or started) when the store was cleared since ``clearCount`` was `clears`.
    /// Returns the change's id (for ``replaceChanges(_:of:)``) with the token that undoes it. Once the commit
    /// succeeds, `replacingOnAccept` gives the changes of the key to do instead from then on (this one's included),
    /// shown with the confirmation in one publication.
    func mutate<Commit: Loader>(
        _ key: Key,
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        order: MutationOrder?,
        unlessClearedSince clears: Int?,
        replacingOnAccept: (@Sendable () -> Machine.Replacement?)? = nil,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (id: Int, undo: any CancellationToken)? {
        // Kept with the change before its commit starts: a clear fails it wherever it stands.
        let pending = PendingLoad<Void> { result in completion(result) }
        guard
            let (id, shown, loads) = locked(
                key,
                {
                    $0.addMutation(
                        Self.erase(change), commit: pending, to: $1, order: order, unlessClearedSince: clears)
                })
        else { return nil }
        if let shown { engine.publish(shown) }
        if loads { submit(.load, for: key) }
        pending.startStep {
            commit.load { [self] result in
                guard case .success = result else {
                    // Refused: the completion runs once the change is undone, in order with the key's changes.
                    let failure = result.map { _ in () }
                    let undone = Machine.SaveTicket(.run { pending.complete(failure) })
                    return submit(.settle(mutation: id, accepted: false, ticket: undone, replacing: nil), for: key)
                }
                // Confirmed: the completion runs once the change is saved to the levels.
                let saved = Machine.SaveTicket(.run { pending.complete(.success(())) })
                let replacing = replacingOnAccept?()
                submit(.settle(mutation: id, accepted: true, ticket: saved, replacing: replacing), for: key)
            }
        }
        let undo = AnyCancellationToken { [weak self] in
            guard pending.cancelReportingPending() else { return }
            self?.submit(.settle(mutation: id, accepted: false, ticket: nil, replacing: nil), for: key)
        }
        return (id, undo)
    }

    /// ``mutate(_:_:commit:order:unlessClearedSince:replacingOnAccept:completion:)`` in a store sharing entities: the
    /// copies of entities the change makes show in every key holding them at once, sent with the same commit and
    /// undone with it, as ``mutate(_:_:commit:completion:)`` does; `completion` receives the commit's outcome once
    /// every key settled it. `nil` when the change makes no copies (nothing is made: make it in the key alone);
    /// `.some(nil)` when the store was cleared since `clears` (nothing is shown or started).
    func mutateSharingEntities(
        _ key: Key, _ change: @escaping @Sendable (Value?) -> Value?, commit: AnyLoader<Void>, order: MutationOrder,
        unlessClearedSince clears: Int?, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (id: Int, undo: any CancellationToken)?? {
        guard let entities = entityObserver else { return nil }
        // The key's own change, placed by `order`; refused by a clear, it tells the entities it settled (so that
        // they let go of the change) but not `completion`: nothing was shown.
        let made = Locked<(id: Int, undo: any CancellationToken)?>(nil)
        let declined = Locked(false)
        let origin: OriginChange = { [self] commit, settled in
            let shown = mutate(
                key, change, commit: commit, order: order, unlessClearedSince: clears, completion: settled)
            guard let shown else {
                declined.withLock { $0 = true }
                settled(.failure(StoreError.cleared))
                return AnyCancellationToken {}
            }
            made.withLock { $0 = shown }
            return shown.undo
        }
        let told: @Sendable (Result<Void, any Error>) -> Void = { result in
            if !declined.withLock({ $0 }) { completion(result) }
        }
        guard let token = entities.mutate(in: self, key, change, origin: origin, commit: commit, completion: told)
        else { return nil }
        guard let (id, _) = made.withLock({ $0 }) else {
            token.cancel()  // the other keys' copies go too
            return .some(nil)
        }
        return (id, token)
    }

    /// Confirms `value`, the server's copy that a queue's change `mutation` of `key` met as a conflict, and writes it
    /// to every level, the change (and the key's other pending changes) still shown over it: nothing when the change
    /// is no longer pending (settled, or dropped by a clear).
    func confirmServerCopy(_ value: Value, underMutation mutation: Int, of key: Key) {
        let stored = StoredValue<any StoreValueBox>(value: ValueBox(value), origin: .network, savedAt: engine.now())
        submit(.serverCopy(stored, underMutation: mutation), for: key)
    }

    /// What `key` shows now (its confirmed value with the pending changes applied), `nil` when nothing.
    func shownValue(of key: Key) -> Value? {
        StoreResponse<Value>(engine.shownResponse(of: StoreKeyRef(object: StoreKey(key), hash: key.hashValue))).value
    }

    /// `key`'s confirmed value now, under its pending changes; `nil` when the store holds none.
    func confirmedValue(of key: Key) -> Value? {
        let confirmed = engine.run(StoreKeyRef(object: StoreKey(key), hash: key.hashValue)) { $0.shown($1)?.confirmed }
        return confirmed.flatMap { StoreResponse<Value>($0).value }
    }

    /// A number that orders the changes made: those made from now on are after it (see ``rewriting(_:shown:)``).
    var changesMade: Int {
        locked { $0.lastNumber }
    }

    /// Pending changes of a key rewritten by a queue (an id the server gave, written into them), each by its id, for
    /// ``replaceChanges(_:of:)`` or a settle; with `shown`, the value the key shows is rewritten alike: applied to
    /// what the key showed with changes made up to `shownUpTo` (``changesMade``, read before the server's id was
    /// known), it shows them without applying them again.
    static func rewriting(
        _ changes: [(id: Int, change: @Sendable (Value?) -> Value?)],
        shown: (rewrite: @Sendable (Value?) -> Value?, shownUpTo: Int)?
    ) -> Machine.Replacement {
        Machine.Replacement(
            changes: changes.map { (mutation: $0.id, change: erase($0.change)) },
            rewritingShown: shown.map { erase($0.rewrite) }, shownUpTo: shown?.shownUpTo ?? 0)
    }

    /// Makes each pending change of `key` that `replacement` names do the change given instead (queued changes
    /// rewritten with an id the server gave): each keeps its place and its commit, and the key shows them in one
    /// publication, from what it showed rewritten when the replacement says how (its changes are not applied
    /// again), or with its changes applied again. A change settled already is left out.
    func replaceChanges(_ replacement: Machine.Replacement, of key: Key) {
        submit(.replace(replacement), for: key)
    }
}
