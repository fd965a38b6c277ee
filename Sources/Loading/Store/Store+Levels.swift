#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Issues `key`'s level operations in the order they were decided, while there are any, starting with `first`
    /// (taken already, with the key's issuing); a clear's `removeAll` waiting for them is issued by the caller that
    /// issues the last.
    @inlinable
    func issueLevelOps(of key: Key, first: Machine.LevelOp? = nil) {
        if let first { issue(first, of: key) }
        while let taken = locked(key, { $0.takeLevelOps(of: $1) }) {
            if taken.removeAll { return removeAllFromLevels() }
            if let first = taken.ops.head { issue(first, of: key) }
            for operation in taken.ops.tail { issue(operation, of: key) }
        }
    }

    /// Sends one level operation to its levels.
    @inlinable
    func issue(_ operation: consuming Machine.LevelOp, of key: Key) {
        let ticket = operation.ticket
        // One closure per operation, capturing the ticket alone (which reports failures itself): it needs no storage
        // of its own. A method reference or an optional chain here would make more.
        let done: @Sendable (Result<Void, any Error>) -> Void =
            if let ticket { { ticket.landed($0) } } else { reportFailure.call }
        switch consume operation {  // its payload moved out, not copied
        case .save(let value, let savedAt, let targets, let skipsDebounced, _, let mark):
            let landed = saveLanded(of: key, mark: mark, then: done)
            let unboxed = (value as! ValueBox<Value>).value
            for index in targets where !skipsDebounced || levels[index].writeDebounce == nil {
                ticket?.hold(reportingTo: reportFailure)
                levels[index].save(unboxed, savedAt, key, landed)
            }
        case .flush(let value, let savedAt, let index, _, let mark):
            ticket?.hold(reportingTo: reportFailure)
            levels[index].save(
                (value as! ValueBox<Value>).value, savedAt, key, saveLanded(of: key, mark: mark, then: done))
        case .remove(_, let mark):
            let landed = saveLanded(of: key, mark: mark, then: done)
            for level in levels {
                ticket?.hold(reportingTo: reportFailure)
                level.removeValue(key, landed)
            }
        }
        ticket?.release()  // the operation's own hold: it is issued
    }

    /// `done`, after telling the machine that a save of `key` landed (see ``StoreMachine/saveLanded(_:mark:failed:at:)``).
    @inlinable
    func saveLanded(
        of key: Key, mark: Machine.SaveMark, then done: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> @Sendable (Result<Void, any Error>) -> Void {
        { [self] result in
            let failed = if case .failure = result { true } else { false }
            let now = now()
            let matches = mark.stale ? Self.matching(key) : nil
            let folded = locked(key) { $0.saveLanded($1, matching: matches, mark: mark, failed: failed, at: now) }
            withExtendedLifetime(folded) {}
            done(result)
        }
    }

    /// Empties every level, then issues the level operations held behind the clear; the clears' completions run
    /// once every level is empty.
    @inlinable
    func removeAllFromLevels() {
        let progress = Locked<(remaining: Int, completions: [@Sendable () -> Void]?)>((levels.count, nil))
        let finish: @Sendable () -> Void = {
            let completions = progress.withLock { progress -> [@Sendable () -> Void] in
                guard progress.remaining == 0, let completions = progress.completions else { return [] }
                progress.completions = []
                return completions
            }
            for completion in completions { completion() }
        }
        for level in levels {
            level.removeAll { [reportFailure] result in
                reportFailure.call(result)
                progress.withLock { $0.remaining -= 1 }
                finish()
            }
        }
        let (completions, held) = lockedWithKeys { machine, keys in
            let (completions, held) = machine.removeAllIssued()
            return (completions, held.map { Self.key(keys.object(at: $0)) })
        }
        progress.withLock { $0.completions = completions }
        finish()
        for key in held { issueLevelOps(of: key) }
    }

    /// Starts the timer of a debounced write. The timer keeps the store alive until it fires: a store released with
    /// a write pending still writes it.
    @inlinable
    func debounce(_ value: Value, for key: Key, level: Int, id: Int) {
        guard let interval = levels[level].writeDebounce else { return }
        let timer = levels[level].scheduler.schedule(after: interval) { [self] in
            perform(locked(key) { $0.debounceFired(id, level: level, for: $1) }, for: key)
        }
        locked(key) { $0.keepTimer(timer, ofWrite: id, level: level, for: $1) }?.cancel()
    }
}
