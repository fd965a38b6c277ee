#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// Applies `job` to `key`, `value` being its closures' result (or its base when it has none).
    mutating func apply(_ job: Job, to key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        switch job {
        case .write(let stored):
            return confirmWrite(stored, for: key)
        case .serverCopy(let stored, let mutation):
            guard entry.work.pending.mutation(mutation) != nil else { return Effects(garbage: [stored]) }
            return confirmWrite(stored, for: key, source: .serverCopy)
        case .update(let change, let reply, let replays, let source):
            // Not applied again by a fetch in flight, unless it `replays` (a change noted as made while none was).
            let change = replays || entry.work.fetches.isEmpty ? change : nil
            guard entry.confirmed.value != nil || value != nil else {
                // Nothing to change; a fetch in flight gets it applied to what it brings.
                if let change { log(change, for: key) }
                let answer = reply.map { FetchReply(completion: $0, result: .success(shownNow(key))) }
                return Effects(fetchReplies: answer.map { [$0] } ?? [])
            }
            let stored = value.map { StoredValue(value: $0, origin: reply == nil ? .local : .network, savedAt: now) }
            changeMakesFresh(key)
            guard let reply else {
                return confirm(
                    stored, for: key, logging: change, levels: levelNames.indices, debounces: true, source: source)
            }
            let saved = SaveTicket()
            let effects = confirm(
                stored, for: key, logging: change, levels: levelNames.indices, ticket: saved, answers: true)
            let shown = effects.publishedLater.last ?? effects.published!
            saved.whenSaved(.replies(InlineFirstArray(FetchReply(completion: reply, result: .success(shown)))))
            return effects
        case .fetched(_, let id):
            return confirmFetch(id, for: key, value: value, now: now)
        case .hit(let cached, let level, let stamp, let staleSince, let error, let reply):
            return confirmHit(
                cached, level: level, stamp: stamp, staleSince: staleSince, error: error, reply: reply, for: key)
        case .external(let cached, let level, let stamp):
            return confirmExternal(cached, level: level, stamp: stamp, for: key)
        case .settle(let id, let accepted, let ticket, let replacing):
            // Those settled meanwhile are not changed.
            let replaced = replacing.map { entry.work.pending.replace($0) }
            var effects = settle(id, accepted: accepted, ticket: ticket, for: key, value: value, now: now)
            if let replacing { effects.garbage += [replaced as Any, replacing] }
            return effects
        case .load:
            return Effects()
        case .flush(let ticket):
            return flushDebounced(of: key, ticket: ticket)
        case .barrier(let reply):
            // The read holds the key until it went on (``endLevelRead(_:since:)``): the key it waited for is not let
            // go of, with what the changes before it made, between its turn and its next step.
            holdKey(key)
            return Effects(fetchReplies: [FetchReply(completion: { _ in reply() }, result: .success(shownNow(key)))])
        case .add(let mutation):
            entry.work.pending.insert(mutation)
            return Effects(publish: publish(key))
        case .replace(let replacement):
            // Those settled meanwhile are not shown again.
            let replaced = entry.work.pending.replace(replacement)
            guard !replaced.isEmpty else { return Effects(garbage: [replacement]) }
            return Effects(publish: publish(key), garbage: [replaced, replacement])
        }
    }

    /// Confirms a value the app wrote, for every level (a debounced one gets it with its burst).
    mutating func confirmWrite(
        _ stored: StoredValue<Value>, for key: Key, source: ConfirmationSource = .change
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        changeMakesFresh(key)
        // Logged for a fetch in flight only (see ``log(_:for:)``): no closure is made otherwise.
        var change: Change?
        if entry.work.fetches.isEmpty {
            entry.log.skip(askedAt: entry.work.turn.asking)
        } else {
            change = { _ in stored.value }
        }
        return confirm(stored, for: key, logging: change, levels: levelNames.indices, debounces: true, source: source)
    }

    mutating func confirmFetch(_ id: Int, for key: Key, value: Value?, now: Date) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard let fetch = entry.work.fetches.end(id) else { return Effects(garbage: [value as Any]) }
        fetchEnded(entry)
        let rebased = entry.log.hasChanges(for: fetch)
        // A refetch this fetch owed stands where it would have been sent had the store known of the answer at once
        // (the answer, or the invalidation after it): the changes asked since are applied again to what it brings.
        let replays = max(entry.work.turn.asking, entry.staleness.mark)
        defer { trimLog(of: key) }
        guard fetch.generation == entry.generation else {
            let replies = fetch.callers.map {
                FetchReply(completion: $0.completion, result: .failure(StoreError.discarded))
            }
            var effects = Effects(fetchReplies: replies, garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        guard entry.work.fetches.confirm(id) else {
            // A fetch started after this one was confirmed first: what it brought stays, and is the answer.
            let shown = shownNow(key)
            var effects = Effects(
                fetchReplies: fetch.callers.map { FetchReply(completion: $0.completion, result: .success(shown)) },
                garbage: [value as Any])
            effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
            return effects
        }
        // Sent after the invalidation: fresh.
        if let sent = fetch.sentMark, sent > entry.staleness.mark { makeFresh(key, from: sent) }
        // A value another process saved to a shared level keeps its date, and goes to the faster levels only.
        var (origin, savedAt, levels) = (StoreOrigin.network, now, levelNames.indices)
        if rebased {
            origin = .local
        } else if let answer = fetch.levelAnswer {
            savedAt = Date(timeIntervalSinceReferenceDate: answer.savedAt)
            (origin, levels) = (.cache(levelNames[answer.level]), 0..<answer.level)
            invalidations.noteStamp(savedAt)
        }
        let stored = value.map { StoredValue(value: $0, origin: origin, savedAt: savedAt) }
        // The callers are answered once the value is saved to the levels (but those saving in the background).
        let saved = SaveTicket()
        var effects = confirm(
            stored, for: key, logging: nil, levels: levels, ticket: saved, answers: true, answersFetch: true)
        let shown = effects.publishedLater.last ?? effects.published!
        saved.whenSaved(
            .replies(fetch.callers.mapInline { FetchReply(completion: $0.completion, result: .success(shown)) }))
        effects.refetches = beginOwedRefetch(key, replayingFrom: replays)
        return effects
    }

    mutating func confirmHit(
        _ cached: CachedValue<Value>, level: Int, stamp: ReadStamp, staleSince: Int?, error: (any Error)?,
        reply: @escaping HitReply, for key: Key
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard entry.generation == stamp.generation, entry.confirmed.version == stamp.confirmedVersion else {
            // The store learned something newer while the level was read (a write, a removal, a clear): what it
            // shows now is the answer, never the level's older value.
            return Effects(hitReplies: [HitReplyDelivery(reply: reply, snapshot: shownNow(key))], garbage: [cached])
        }
        invalidations.noteStamp(cached.savedAt)
        let stored = StoredValue(value: cached.value, origin: .cache(levelNames[level]), savedAt: cached.savedAt)
        // Stale as the invalidations recorded before the read judged the level's value (`staleSince`), or as one
        // that matched the key while it was read: that one marked the entry, which the read holds.
        entry.staleness.confirmLevelValue(staleSince: staleSince, markWhenRead: stamp.staleMark)
        var effects = confirm(
            stored, for: key, logging: nil, levels: 0..<level, error: error, answers: true, source: .level)
        let shown = effects.publishedLater.last ?? effects.published!
        effects.hitReplies = [HitReplyDelivery(reply: reply, snapshot: shown)]
        return effects
    }

    /// Confirms what a shared level holds after another process changed the key there (`nil`: it removed it), for
    /// the faster levels only: the shared level is not written back. Unless the store learned something of the key
    /// while the level was read (a write, a fetch, a removal, a clear): that is newer, and its own save will tell
    /// the other processes.
    mutating func confirmExternal(
        _ cached: CachedValue<Value>?, level: Int, stamp: ReadStamp, for key: Key
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard entry.generation == stamp.generation, entry.confirmed.version == stamp.confirmedVersion else {
            return Effects(garbage: [cached as Any])
        }
        guard let cached else { return confirm(nil, for: key, logging: nil, levels: 0..<level) }
        invalidations.noteStamp(cached.savedAt)
        entry.staleness.confirmLevelValue(staleSince: nil, markWhenRead: stamp.staleMark)
        let stored = StoredValue(value: cached.value, origin: .cache(levelNames[level]), savedAt: cached.savedAt)
        return confirm(stored, for: key, logging: nil, levels: 0..<level)
    }

    mutating func settle(
        _ id: Int, accepted: Bool, ticket: SaveTicket?, for key: Key, value: Value?, now: Date
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard
            let mutation = entry.work.pending.remove(id, accepted: accepted, confirmedVersion: entry.confirmed.version)
        else {
            return Effects(garbage: [value as Any], released: ticket.map { [$0] } ?? [])
        }
        guard accepted else {
            return Effects(
                publish: publish(key), garbage: [mutation, value as Any], released: ticket.map { [$0] } ?? [])
        }
        let stored = value.map { StoredValue(value: $0, origin: .local, savedAt: now) }
        changeMakesFresh(key)
        var effects = confirm(stored, for: key, logging: mutation.change, levels: levelNames.indices, ticket: ticket)
        effects.garbage.append(mutation)
        return effects
    }

    /// Turns `key`'s debounced writes into level operations now (a flush), cancelling their timers; `ticket` (held
    /// once for the flush of this key) is held by each, and by the key's saves in flight now (writes issued before
    /// the flush, still on their way to a level) until they land. Operations decided before the flush and not issued
    /// yet (another caller is issuing the key's) are waited for too: the ticket waits behind them, and for their
    /// saves once they are issued.
    mutating func flushDebounced(of key: Key, ticket: SaveTicket) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        var effects = Effects()
        if entry.work.writes.hasOps {
            decide(.waitForSaves(ticket: ticket), for: entry)
        } else if !entry.work.saves.whenLanded(ticket) {
            effects.released = [ticket]
        }
        effects.cancels = entry.work.writes.flushDebounced(holding: ticket)
        effects.issueLevels = startIssuing(key)
        return effects
    }

    /// The keys a flush asks: those with debounced writes or level operations waiting, changes queued or running
    /// (which may make some), or saves on their way to a level.
    func keysToFlush() -> [Key] {
        entries.compactMap { key, slot in
            guard case .inUse(let entry) = slot else { return nil }
            return entry.work.writes.isSettled && entry.work.turn.isFree && !entry.work.saves.hasInFlight ? nil : key
        }
    }

    /// Replaces `key`'s confirmed value, notes the change for the fetches in flight, decides the level writes and
    /// publishes the new shown value (the last of ``Effects/published`` and ``Effects/publishedLater`` when it
    /// `answers` a caller too). When `debounces`, the debounced levels are written when their timers fire; otherwise
    /// every level at once (a debounced write waiting is dropped: this one is newer). The writes hold `ticket`,
    /// released at once when there are none (the writes of the levels saving in the background do not, when it
    /// `answersFetch`).
    mutating func confirm(
        _ stored: StoredValue<Value>?, for key: Key, logging change: Change?, levels targets: Range<Int>,
        error: (any Error)? = nil, debounces: Bool = false, ticket: SaveTicket? = nil, answers: Bool = false,
        answersFetch: Bool = false, source: ConfirmationSource = .change
    ) -> Effects {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        var effects = Effects()
        effects.replaced = entry.confirmed.set(stored)  // moved out, released after unlocking
        if reportsConfirmations {
            (effects.confirmedFrom, effects.confirmedValue) = (source, stored?.value)
        }
        if let change { log(change, for: key) }
        let mark = saveMark(
            for: key, generation: entry.generation, version: entry.confirmed.version, staleSince: entry.staleness.mark,
            targets: targets, debounces: debounces)
        if let stored {
            if !targets.isEmpty {
                decide(
                    .save(
                        stored.value, savedAt: stored.savedAtSeconds, levels: targets, skipsDebounced: debounces,
                        ticket: ticket, answersFetch: answersFetch, mark: mark), for: entry)
            } else if let ticket {
                effects.released.append(ticket)
            }
            for level in targets where !debouncedLevels.isEmpty && debouncedLevels.contains(level) {
                guard debounces else {
                    if let dropped = entry.work.writes.dropDebounced(at: level) { effects.cancels.append(dropped) }
                    continue
                }
                let write = DebouncedWrite(
                    id: next(), value: stored.value, savedAt: stored.savedAtSeconds, mark: mark, timer: FinishedToken())
                if let replaced = entry.work.writes.debounce(write, at: level) { effects.cancels.append(replaced) }
                effects.debounce.append(DebounceStart(level: level, id: write.id, value: stored.value))
            }
        } else {
            effects.cancels += entry.work.writes.dropDebounced()
            decide(.remove(levels: targets, ticket: ticket, answersFetch: answersFetch, mark: mark), for: entry)
        }
        effects.publish(publish(key, error: error, answers: answers))
        effects.issueLevels = startIssuing(key)
        return effects
    }
}
