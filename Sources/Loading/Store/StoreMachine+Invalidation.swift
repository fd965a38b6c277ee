#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's staleness: the part that keeps its stale mark and the refetch it owes (`Staleness`), then the machine's
// events that invalidate keys, mark them stale and find those to revalidate.

extension StoreMachine {
    /// Whether a key's value is stale, and the refetch it owes its observers. An invalidation marks the value stale
    /// with the store's counter at that moment (`mark`); a fetch sent after it, a write, an update or a confirmed
    /// optimistic change makes it fresh. A refetch is owed when the key goes stale while a fetch sent before is in
    /// flight: it begins once that fetch ends, once however many invalidations come meanwhile, unless a change asked
    /// after the invalidations that owed it confirms first.
    struct Staleness: Sendable {
        /// Nonzero while the value is stale: the counter at the invalidation that made it so (the latest).
        private(set) var mark = 0
        /// Whether a fetch is owed to the observers once the fetch in flight ends.
        private(set) var owesRefetch = false
        /// The mark the value had when the refetch became owed, while one is.
        private var owedSince = 0
        /// The mark of the latest invalidation that owed the refetch (read only while one is owed).
        private var lastOwedAt = 0

        /// Whether the value was invalidated and not made fresh since.
        var isStale: Bool { mark != 0 }

        /// An invalidation at `mark` matched the key (a mark of zero changes nothing).
        mutating func markStale(at mark: Int) {
            self.mark = max(self.mark, mark)
        }

        /// The value is fresh: a fetch sent after the invalidation brought it, or the app wrote it. A refetch owed for
        /// the invalidation is not needed any more.
        mutating func makeFresh() {
            (mark, owesRefetch) = (0, false)
        }

        /// The value is gone (a removal, a clear): it is not stale, and what made a refetch owed is gone with it.
        mutating func reset() {
            (mark, owesRefetch) = (0, false)
        }

        /// The value read from a level is confirmed: stale as the invalidations recorded before the read judged it
        /// (`staleSince`), or, when the mark changed since the read began (`markWhenRead`), as an invalidation that
        /// matched the key while it was read.
        mutating func confirmLevelValue(staleSince: Int?, markWhenRead: Int) {
            mark = mark != markWhenRead ? max(mark, staleSince ?? 0) : staleSince ?? 0
        }

        /// The key went stale while a fetch sent before is in flight: one refetch is owed (once, however many
        /// times this is called before it begins), by this invalidation too.
        mutating func oweRefetch() {
            lastOwedAt = mark
            guard !owesRefetch else { return }
            (owesRefetch, owedSince) = (true, mark)
        }

        /// A change asked at `asking` confirmed while an invalidation that came after it keeps the value stale: what
        /// the app wrote is fresh against every invalidation before it, so a refetch owed only for those is not needed.
        mutating func changeConfirmed(askedAt asking: Int) {
            if owesRefetch, asking > lastOwedAt { owesRefetch = false }
        }

        /// The owed refetch begins now, or is not needed any more.
        mutating func settleRefetch() {
            owesRefetch = false
        }

        /// A fetch sent at `sent` waits for the network before it sends its request: it counts as not sent, so a
        /// refetch owed by an invalidation after `sent` is not needed (what it brings is fresh against it).
        mutating func fetchWaits(sentAt sent: Int) {
            if owesRefetch, owedSince > sent { owesRefetch = false }
        }
    }
}

extension StoreMachine {
    /// What a reader needs to judge `key`'s level value for invalidations, or `nil` when nothing was invalidated.
    func staleRules(for key: Key) -> StaleRules? {
        invalidations.rules(for: key)
    }

    /// Marks `key` stale at `date`; returns whether it is observed (the store then refetches it), and a record
    /// folded out of the limit, to release after unlocking.
    mutating func invalidate(
        _ key: Key, matching matches: @escaping @Sendable (AnyKey) -> Bool, at date: Date
    ) -> (observed: Bool, garbage: Invalidation?) {
        let mark = next()
        let garbage = invalidations.record(matches, at: date, as: mark)
        return (!markStale([key], mark: mark).isEmpty, garbage)
    }

    /// The first half of an invalidation by predicate: records it, and returns every key the store holds, for the
    /// caller to judge with the predicate after unlocking (then ``markStale(_:mark:)`` with `mark`).
    mutating func beginInvalidation(
        _ matches: @escaping @Sendable (AnyKey) -> Bool, at date: Date
    ) -> (mark: Int, keys: [Key], garbage: Invalidation?) {
        let mark = next()
        let garbage = invalidations.record(matches, at: date, as: mark)
        return (mark, Array(entries.keys), garbage)
    }

    /// Marks every key stale at `date`; returns the observed ones, and the records it replaces.
    mutating func invalidateAll(at date: Date) -> (observed: [Key], garbage: [Invalidation]) {
        let mark = next()
        let replaced = invalidations.recordAll(at: date, as: mark)
        return (markStale(entries.keys, mark: mark), replaced)
    }

    /// Marks the entries of `keys` stale, as of `mark`; returns those that are observed.
    mutating func markStale(_ keys: some Sequence<Key>, mark: Int) -> [Key] {
        var observed: [Key] = []
        for key in keys {
            guard let slot = slot(key) else { continue }
            slot.record.staleness.markStale(at: mark)
            if let entry = slot.entry, entry.observers > 0 { observed.append(key) }
        }
        return observed
    }

    /// `key`'s confirmed value is fresh from `point` in the store's order (a fetch sent then, a write): remembered
    /// while invalidations are recorded.
    mutating func noteRefreshed(_ key: Key, from point: Int) {
        let forgotten = invalidations.noteRefreshed(key, from: point)
        if !forgotten.isEmpty { dropped += forgotten }
    }

    /// The observed keys to revalidate: those with no value, an invalidated one, or one older than `maxAgeSeconds`
    /// (every value, without one). A key whose fetch is in flight is left to it.
    func revalidationTargets(now: Date, maxAgeSeconds: Double?) -> [Key] {
        entries.compactMap { key, slot in
            guard let entry = slot.entry, entry.observers > 0 else { return nil }
            return needsRevalidation(slot, now: now, maxAgeSeconds: maxAgeSeconds) ? key : nil
        }
    }

    /// The keys to refresh within a budget, in order: those not fresh (as ``revalidationTargets(now:maxAgeSeconds:)``
    /// judges) that are observed now or were observed while the store held them, the one observed most recently
    /// first (observed now before observed earlier). A key whose fetch is in flight is left to it.
    func budgetTargets(now: Date, maxAgeSeconds: Double?) -> [Key] {
        entries.compactMap { key, slot in
            slot.record.observedAt > 0 && needsRevalidation(slot, now: now, maxAgeSeconds: maxAgeSeconds)
                ? (key: key, observed: (slot.entry?.observers ?? 0) > 0, at: slot.record.observedAt) : nil
        }
        .sorted { $0.observed != $1.observed ? $0.observed : $0.at > $1.at }
        .map(\.key)
    }

    /// Whether the key in `slot` has no value, an invalidated one, or one older than `maxAgeSeconds` (every value,
    /// without one), and no fetch in flight to bring a fresh one.
    private func needsRevalidation(_ slot: EntryTable.Slot, now: Date, maxAgeSeconds: Double?) -> Bool {
        guard slot.entry?.work.fetches.isEmpty ?? true else { return false }
        let record = slot.record
        guard let confirmed = record.confirmed.value, !record.staleness.isStale, let maxAgeSeconds else { return true }
        guard isHeldByLevels(confirmed, now: now) else { return true }
        return confirmed.savedAt > now || now.timeIntervalSince(confirmed.savedAt) >= maxAgeSeconds
    }
}
