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
