#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
