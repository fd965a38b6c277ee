import Dispatch

// Conflicts: the server answered a mutation with its own copy of the key's value; the app says what to do.
extension MutationQueue {
    /// Resolves the conflict of mutation `id`, which waits for the app (``ConflictResolution/ask``, or restored so
    /// after a restart): sends it again over the server's copy, with a merged input, or undoes it in favour of the
    /// server's copy; `.ask` leaves it waiting. Runs off the caller's thread (the resolution's save waits for the
    /// disk), and returns once the resolution is saved; what follows comes with ``outcome(of:)``. A task cancelled
    /// before it starts resolves nothing and throws `CancellationError`.
    ///
    /// ```swift
    /// for mutation in outbox.pending where mutation.awaitsResolution {
    ///     try await outbox.resolveConflict(mutation.id, with: .rebase)
    /// }
    /// ```
    /// - Throws: ``MutationConflictError/noConflict(id:)`` when mutation `id` waits for no resolution.
    public func resolveConflict(_ id: String, with resolution: ConflictResolution<Input>) async throws {
        if Task.isCancelled { throw CancellationError() }
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.resolveConflictNow(id, with: resolution) })
            }
        }
    }

    /// ``resolveConflict(_:with:)`` on the caller's thread.
    func resolveConflictNow(_ id: String, with resolution: ConflictResolution<Input>) throws {
        guard resolve(id, with: resolution, releasing: nil) else { throw MutationConflictError.noConflict(id: id) }
        pump()
    }

    /// Whether attempt `serial` of `record` failed with a conflict (`conflicts` finds the server's copy in `error`),
    /// which this then handles: the server's copy is confirmed under the mutation's change, and the app's resolution
    /// carried out. An answer of an attempt taken back (a logout, a discard) changes nothing, but is a conflict still.
    func conflicted(_ record: StoredMutation<Input>, _ serial: Int, _ error: any Error) -> Bool {
        guard let conflicts else { return false }
        let key = key(record.input)
        guard let serverCopy = conflicts.serverCopy(error, store.confirmedValue(of: key)) else { return false }
        let shown = store.shownValue(of: key)
        let met = ledger.withLock { $0.conflict(serial, with: error, serverCopy: serverCopy) }
        guard let (attempt, kept, change) = met else { return true }
        let record = StoredMutation<Input>(kept)
        // Only while the change is pending: after a logout, the old user's copy is not shown.
        if let change { store.confirmServerCopy(serverCopy, underMutation: change.id, of: key) }
        publish()
        let conflict = MutationConflict(
            id: record.id, input: record.input, serverCopy: serverCopy, shown: shown, error: error)
        // A clear or a discard may have taken it meanwhile: then there is nothing to resolve.
        if !resolve(record.id, with: conflicts.resolve(conflict), releasing: attempt.lease) {
            attempt.lease?.release()
        }
        return true
    }

    /// Carries out `resolution` for conflicted mutation `id`, releasing `lease` (the right to send of the attempt
    /// that met the conflict, when it has one) once the storage holds the resolution, before anything more is
    /// sent; `false` when it is not conflicted (nothing is released).
    private func resolve(
        _ id: String, with resolution: ConflictResolution<Input>, releasing lease: MutationSendingLease?
    ) -> Bool {
        switch resolution {
        case .rebase: return rebase(id, releasing: lease)
        case .merge(let input): return resend(id, input: input, releasing: lease)
        case .ask:
            guard let (record, saves) = ledger.withLock({ $0.awaitResolution(id) }) else { return false }
            do { try storage.save(StoredMutation<Input>(record)) } catch { onStorageFailure(error) }
            saves.leave()
            lease?.release()
            publish()
            return true
        case .takeServerCopy:
            guard let (kept, commit) = ledger.withLock({ $0.giveWay(id) }) else { return false }
            let record = StoredMutation<Input>(kept)
            // Forgotten first: a kill from now on does not send it again, nor does another process.
            forget(record)
            lease?.release()
            // What names a creation's item goes first: the creation's settling sends the next mutation.
            if let temporary = creation?.temporaryID(record.input) {
                takeOutNaming(temporary, because: MutationConflictError.replacedByServerCopy, sparing: record.id)
            }
            commit?(.failure(MutationConflictError.replacedByServerCopy))
            return true
        }
    }

    /// Sends conflicted mutation `id` again over the server's copy: made anew against it with `rebasing` when the
    /// queue has it (the copy its conflict came with, or after a restart the key's confirmed value, which is that
    /// copy unless the key changed since), else as it is. A store that holds no value of the key after a restart sends
    /// it as it is too: a server that checks a version answers with the conflict again, and its copy.
    private func rebase(_ id: String, releasing lease: MutationSendingLease?) -> Bool {
        guard let rebasing = conflicts?.rebasing else { return resend(id, input: nil, releasing: lease) }
        guard let (erased, kept) = ledger.withLock({ $0.conflicted(id) }) else { return false }
        let record = StoredMutation<Input>(erased)
        let copy = (kept as? Value) ?? store.confirmedValue(of: key(record.input))
        return resend(id, input: copy.map { rebasing(record.input, $0) }, releasing: lease)
    }

    /// Makes conflicted mutation `id` wait to be sent again, with `input` when merged (shown at once over the
    /// server's copy); the resend is saved first.
    private func resend(_ id: String, input: Input?, releasing lease: MutationSendingLease?) -> Bool {
        guard let (kept, change, saves) = ledger.withLock({ $0.resend(id, input: input) }) else { return false }
        let record = StoredMutation<Input>(kept)
        do { try storage.save(record) } catch { onStorageFailure(error) }
        saves.leave()
        lease?.release()
        if input != nil, let change { showAgain([(change, record.input)]) }
        publish()
        return true
    }
}
