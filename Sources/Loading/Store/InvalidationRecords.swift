#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What the store was told of invalidations, for judging the values the levels hold: the latest records (each a
    /// predicate on keys and a date), the point before which everything is stale (an invalidation of every key, or
    /// old records folded), the latest date a level stamped a value with, and the keys refreshed since.
    ///
    /// Bounded: at most ``limit`` records (the oldest fold into the stale point: more is judged stale, never less),
    /// and ``RefreshedKeys/limit`` refreshed keys.
    struct InvalidationRecords: Sendable {
        /// How many records are kept before the oldest fold into the stale point.
        static var limit: Int { 64 }

        /// In no order (a reader looks at every one): once there are ``limit``, a new record takes the place of the
        /// oldest, at `oldest`, so that recording one moves no other.
        private var records: [Invalidation] = []
        private var oldest = 0
        private var staleBefore: StaleBefore?
        /// The latest date a level stamped a value of this store's with (a save landed) or was read with:
        /// invalidations are dated no earlier.
        private var latestStamp: Date?
        private var refreshed = RefreshedKeys()

        /// Whether anything was invalidated (since the last clear).
        var isRecording: Bool { staleBefore != nil || !records.isEmpty }

        /// What a reader needs to judge `key`'s level value, or `nil` when nothing was invalidated.
        func rules(for key: Key) -> StaleRules? {
            guard isRecording else { return nil }
            return StaleRules(staleBefore: staleBefore, invalidations: records, refreshedAt: refreshed.point(of: key))
        }

        /// A level holds a value saved at `date` (it landed then, or was read with that date): an invalidation
        /// recorded later is dated no earlier, so that it judges that value stale even when the clock was set back.
        mutating func noteStamp(_ date: Date) {
            if latestStamp.map({ $0 < date }) ?? true { latestStamp = date }
        }

        /// Records an invalidation of the keys `matches` accepts, made at `date` (or the latest stamp, when later: the
        /// clock was set back), as of `mark` in the store's order. Returns the oldest record when it no longer fits,
        /// folded into the stale point, to release after unlocking.
        mutating func record(
            _ matches: @escaping @Sendable (AnyKey) -> Bool, at date: Date, as mark: Int
        ) -> Invalidation? {
            let invalidation = Invalidation(date: stamped(date), generation: mark, matches: matches)
            guard records.count == Self.limit else {
                records.append(invalidation)
                return nil
            }
            let folded = exchange(&records[oldest], with: invalidation)
            oldest = (oldest + 1) % Self.limit
            staleBefore = StaleBefore(date: folded.date, generation: folded.generation).merged(with: staleBefore)
            return folded
        }

        /// Records that every key is stale at `date`, as of `mark`; returns the records it replaces.
        mutating func recordAll(at date: Date, as mark: Int) -> [Invalidation] {
            staleBefore = StaleBefore(date: stamped(date), generation: mark).merged(with: staleBefore)
            oldest = 0
            return exchange(&records, with: [])
        }

        /// `key`'s confirmed value is fresh from `point` in the store's order (a fetch sent then, a write): remembered
        /// while anything is invalidated. Returns the keys no longer remembered.
        mutating func noteRefreshed(_ key: Key, from point: Int) -> [Key] {
            guard isRecording else { return [] }
            return refreshed.note(key, from: point)
        }

        /// Whether `key` is remembered as refreshed.
        func remembersRefresh(of key: Key) -> Bool {
            refreshed.contains(key)
        }

        /// Forgets everything (a clear: the levels are emptied, nothing they will hold was saved before). Returns the
        /// records, to release after unlocking, and the keys no longer remembered as refreshed.
        mutating func removeAll() -> (records: [Invalidation], forgotten: [Key]) {
            let forgotten = refreshed.removeAll()
            let records = exchange(&records, with: [])
            let latestStamp = latestStamp
            self = InvalidationRecords()
            self.latestStamp = latestStamp
            return (records, forgotten)
        }

        /// `date`, or the latest stamp when that is later.
        private func stamped(_ date: Date) -> Date {
            latestStamp.map { max($0, date) } ?? date
        }
    }
}

extension StoreMachine {
    /// An invalidation of the keys `matches` accepts, made at `date`, as the store's `generation` counted then.
    struct Invalidation: Sendable {
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
    struct StaleRules: Sendable {
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
        func staleSince(_ key: AnyKey, savedAt: Date) -> Int? {
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
