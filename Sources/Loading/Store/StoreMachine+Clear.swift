#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// Removes `key`'s value at once: the writes and updates queued for it are dropped, fetches and level reads in
    /// flight confirm nothing, optimistic changes stay pending, and the levels lose the key.
    mutating func remove(_ key: Key) -> Effects {
        let entry = ensureEntry(key)
        var effects = Effects()
        let dropped = dropQueuedByRemoval(of: entry)
        if reportsConfirmations, entry.confirmed.value != nil { effects.confirmedFrom = .change }
        effects.replaced = entry.confirmed.set(nil)  // released after unlocking
        effects.garbage = [dropped]
        effects.fetchReplies = dropped.compactMap { $0.droppedReply }
        entry.generation = next()
        entry.staleness.reset()  // what made it stale is gone with the value
        effects.cancels = entry.work.writes.dropDebounced()
        let mark = saveMark(
            for: key, generation: entry.generation, version: entry.confirmed.version, staleSince: 0,
            targets: levelNames.indices)
        decide(.remove(levels: levelNames.indices, ticket: nil, mark: mark), for: entry)
        effects.publish(publish(key))
        effects.issueLevels = startIssuing(key)
        return effects
    }

    /// Takes out of `entry`'s queue the jobs a removal or a clear drops (writes and updates; a clear, the optimistic
    /// changes waiting to be shown too). The job running now stays at the head: its commit takes it off and judges it
    /// (see ``commitWork(_:result:for:now:)``).
    func dropQueuedByRemoval(of entry: Entry, clearing: Bool = false) -> [Job] {
        entry.work.turn.drop { $0.isDroppedByRemoval || (clearing && $0.added != nil) }
    }

    /// Forgets everything (a logout): every key shows nothing, pending changes are cancelled (their commits are
    /// returned to fail), debounced writes are cancelled, and the levels are emptied once what was decided before is
    /// issued (`removeAll`, or the caller that issues the last of it): every level, or the first `levels` (those
    /// faster than a level another process emptied).
    ///
    /// Another process's logout, made at `logout` in the processes' order, is older than a change of this store made
    /// after it whose save to the shared level is not issued yet: that key's latest change is the next user's, and
    /// stays shown; its saves made after the logout are issued once the levels are emptied (those made before go).
    /// A clear that empties the shared level has its `place` in the processes' order, taken as it is made.
    mutating func clear(
        levels: Int? = nil, keepingChangesAfter logout: UInt64? = nil, place: UInt64? = nil,
        completion: @escaping @Sendable () -> Void
    ) -> Effects {
        clears += 1
        var effects = Effects()
        for (key, slot) in entries {
            guard case .inUse(let entry) = slot else {
                drop(key)  // a kept key: no work, no observer; its value is released with its record
                continue
            }
            let shownBefore = entry.showsSomething
            let dropped = dropQueuedByRemoval(of: entry, clearing: true)
            let pending = entry.work.pending.removeAll() + dropped.compactMap { $0.added }
            let (ops, timers, outlives) = entry.work.writes.removeAll(keepingChangesAfter: logout)
            effects.garbage += [dropped, ops, pending]
            effects.fetchReplies += dropped.compactMap { $0.droppedReply }
            effects.released += ops.compactMap { $0.ticket }  // work waiting for dropped writes goes on
            effects.failedCommits += pending.compactMap { $0.commit }
            effects.cancels += timers
            if outlives {
                if !pending.isEmpty { effects.publish(publish(key)) }  // the confirmed value, without the changes
                release(key)
                continue
            }
            effects.garbage.append(entry.confirmed.set(nil) as Any)
            entry.generation = next()
            entry.staleness.reset()
            entry.work.saves.cleared(at: entry.confirmed.version)
            entry.keptStamp = nil
            if shownBefore || entry.observers > 0 { effects.publish(publish(key)) }
            release(key)
        }
        kept.removeAll()
        // The levels are emptied: nothing they will hold was saved before the clear.
        let (records, forgotten) = invalidations.removeAll()
        effects.garbage.append(records)
        dropped += forgotten
        effects.removeAll = issuing.clear(levels: levels ?? levelNames.count, place: place, completion: completion)
        return effects
    }

    /// The place in the processes' order of the clears waiting, if they empty the shared level.
    var clearPlace: UInt64? { issuing.place }

    /// How many levels the clears waiting empty (see ``clear(levels:completion:)``).
    var levelsToEmpty: Int { issuing.levelsToEmpty }

    /// A clear's `removeAll` was issued: returns the callers of the clears waiting for the levels to be empty, the
    /// keys whose level operations were held (the caller issues them now, as it would its own), how many levels
    /// those clears empty, and their place in the processes' order.
    mutating func removeAllIssued() -> (
        completions: [@Sendable () -> Void], held: [Key], levels: Int, place: UInt64?
    ) {
        let (completions, held, levels, place) = issuing.removeAllIssued()
        let keys = held.filter { entries.entry(at: $0)?.work.writes.hasOps ?? false }
        for key in keys { entry(key, heldBecause: "it has level operations").work.writes.startIssuing() }
        issuing.resume(keys.count)
        return (completions, keys, levels, place)
    }
}
