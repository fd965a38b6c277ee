#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What a reader needs to judge `key`'s level value for invalidations, or `nil` when nothing was invalidated.
    @usableFromInline func staleRules(for key: Key) -> StaleRules? {
        guard staleBefore != nil || !invalidations.isEmpty else { return nil }
        return StaleRules(staleBefore: staleBefore, invalidations: invalidations, refreshedAt: refreshed.point(of: key))
    }

    /// Marks `key` stale at `date`; returns whether it is observed (the store then refetches it), and a record
    /// folded out of the limit, to release after unlocking.
    mutating func invalidate(
        _ key: Key, matching matches: @escaping @Sendable (AnyKey) -> Bool, at date: Date
    ) -> (observed: Bool, garbage: Invalidation?) {
        let mark = next()
        let garbage = record(Invalidation(date: stamped(date), generation: mark, matches: matches))
        return (!markStale([key], mark: mark).isEmpty, garbage)
    }

    /// The first half of an invalidation by predicate: records it, and returns every key the store holds, for the
    /// caller to judge with the predicate after unlocking (then ``markStale(_:mark:)`` with `mark`).
    mutating func beginInvalidation(
        _ matches: @escaping @Sendable (AnyKey) -> Bool, at date: Date
    ) -> (mark: Int, keys: [Key], garbage: Invalidation?) {
        let mark = next()
        let garbage = record(Invalidation(date: stamped(date), generation: mark, matches: matches))
        return (mark, Array(entries.keys), garbage)
    }

    /// Marks every key stale at `date`; returns the observed ones, and the records it replaces.
    mutating func invalidateAll(at date: Date) -> (observed: [Key], garbage: [Invalidation]) {
        let mark = next()
        staleBefore = StaleBefore(date: stamped(date), generation: mark).merged(with: staleBefore)
        return (markStale(entries.keys, mark: mark), exchange(&invalidations, with: []))
    }

    /// Marks the entries of `keys` stale, as of `mark`; returns those that are observed.
    mutating func markStale(_ keys: some Sequence<Key>, mark: Int) -> [Key] {
        var observed: [Key] = []
        for key in keys {
            guard let entry = entry(key) else { continue }
            entry.staleMark = max(entry.staleMark, mark)
            if entry.observers > 0 { observed.append(key) }
        }
        return observed
    }

    /// A level holds a value saved at `date` (it landed then, or was read with that date): an invalidation recorded
    /// later is dated no earlier, so that it judges that value stale even when the clock was set back since.
    mutating func noteStamp(_ date: Date) {
        if latestStamp.map({ $0 < date }) ?? true { latestStamp = date }
    }

    /// `date`, or the latest date a level stamped a value with when that is later (the clock was set back): the date
    /// of an invalidation, which judges by date the values this store saved before it.
    func stamped(_ date: Date) -> Date {
        latestStamp.map { max($0, date) } ?? date
    }

    /// Adds an invalidation record; returns the oldest when it no longer fits (folded into `staleBefore`).
    mutating func record(_ invalidation: Invalidation) -> Invalidation? {
        invalidations.append(invalidation)
        guard invalidations.count > Self.invalidationLimit else { return nil }
        let oldest = invalidations.removeFirst()
        staleBefore = StaleBefore(date: oldest.date, generation: oldest.generation).merged(with: staleBefore)
        return oldest
    }

    /// `key`'s confirmed value is fresh from `point` in the store's order (a fetch sent then, a write): remembered
    /// while invalidations are recorded (see ``refreshed``).
    mutating func noteRefreshed(_ key: Key, from point: Int) {
        guard staleBefore != nil || !invalidations.isEmpty else { return }
        dropped += refreshed.note(key, from: point)
    }

    /// The observed keys to revalidate: those with no value, an invalidated one, or one older than `maxAgeSeconds`
    /// (every value, without one). A key whose fetch is in flight is left to it.
    func revalidationTargets(now: Date, maxAgeSeconds: Double?) -> [Key] {
        entries.compactMap { key, entry in
            entry.observers > 0 && needsRevalidation(entry, now: now, maxAgeSeconds: maxAgeSeconds) ? key : nil
        }
    }

    /// The keys to refresh within a budget, in order: those not fresh (as ``revalidationTargets(now:maxAgeSeconds:)``
    /// judges) that are observed now or were observed while the store held them, the one observed most recently
    /// first (observed now before observed earlier). A key whose fetch is in flight is left to it.
    func budgetTargets(now: Date, maxAgeSeconds: Double?) -> [Key] {
        entries.compactMap { key, entry in
            entry.observedAt > 0 && needsRevalidation(entry, now: now, maxAgeSeconds: maxAgeSeconds)
                ? (key: key, observed: entry.observers > 0, at: entry.observedAt) : nil
        }
        .sorted { $0.observed != $1.observed ? $0.observed : $0.at > $1.at }
        .map(\.key)
    }

    /// Whether `entry` has no value, an invalidated one, or one older than `maxAgeSeconds` (every value, without
    /// one), and no fetch in flight to bring a fresh one.
    private func needsRevalidation(_ entry: Entry, now: Date, maxAgeSeconds: Double?) -> Bool {
        guard entry.fetches.isEmpty else { return false }
        guard let confirmed = entry.confirmed, entry.staleMark == 0, let maxAgeSeconds else { return true }
        return confirmed.savedAt > now || now.timeIntervalSince(confirmed.savedAt) >= maxAgeSeconds
    }
}

extension StoreMachine {
    /// An invalidation of the keys `matches` accepts, made at `date`, as the store's `generation` counted then.
    @usableFromInline struct Invalidation: Sendable {
        init(date: Date, generation: Int, matches: @escaping @Sendable (AnyKey) -> Bool) {
            self.date = date
            self.generation = generation
            self.matches = matches
        }

        let date: Date
        let generation: Int
        let matches: @Sendable (AnyKey) -> Bool
    }

    /// Everything saved before a point is stale: an invalidation of every key, or old records folded.
    struct StaleBefore: Sendable {
        let date: Date
        let generation: Int

        /// This point or `other`, whichever is later by both measures.
        func merged(with other: StaleBefore?) -> StaleBefore {
            guard let other else { return self }
            return StaleBefore(date: max(date, other.date), generation: max(generation, other.generation))
        }
    }

    /// The invalidations a reader judges one key's level value by, outside the lock (a predicate is the caller's
    /// code), with when the store itself last confirmed a fresh value of the key (`refreshedAt`, in its order).
    @usableFromInline struct StaleRules: Sendable {
        let staleBefore: StaleBefore?
        let invalidations: [Invalidation]
        let refreshedAt: Int?

        /// Whether `key`'s value saved at `savedAt` was invalidated since. A value the store confirmed fresh after an
        /// invalidation (a fetch sent after it, a write) is not stale by it, whatever the clock said when it was
        /// saved (it may have been set back); a value someone else saved is judged by its date.
        func isStale(_ key: AnyKey, savedAt: Date) -> Bool {
            staleSince(key, savedAt: savedAt) != nil
        }

        /// The place in the store's order of the latest invalidation that judges `key`'s value saved at `savedAt`
        /// stale (a fetch sent after it makes the value fresh again); `nil` when none does.
        @usableFromInline func staleSince(_ key: AnyKey, savedAt: Date) -> Int? {
            var since: Int?
            if let staleBefore, !refreshed(since: staleBefore.generation), savedAt <= staleBefore.date {
                since = staleBefore.generation
            }
            // Records are not in the order of their places (a stale save's record takes its invalidation's).
            for invalidation in invalidations where since.map({ $0 < invalidation.generation }) ?? true {
                if !refreshed(since: invalidation.generation), savedAt <= invalidation.date,
                    invalidation.matches(key)
                {
                    since = invalidation.generation
                }
            }
            return since
        }

        func refreshed(since generation: Int) -> Bool {
            refreshedAt.map { $0 > generation } ?? false
        }
    }
}
