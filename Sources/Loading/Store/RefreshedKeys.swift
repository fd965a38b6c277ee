extension StoreMachine {
    /// While invalidations are recorded: the keys the store confirmed a fresh value of since, each with the point in
    /// the store's order it was fresh from (a fetch's sending, a write), so that an invalidation older than that point
    /// does not judge a level's copy stale, whatever its date.
    ///
    /// At most ``limit`` keys are remembered, the oldest forgotten first: such a key is judged by its date again, so
    /// more is refetched, never less. Noting a key costs the same however many are remembered.
    struct RefreshedKeys: Sendable {
        /// How many keys are remembered.
        static var limit: Int { 4_096 }

        private var points: [Key: Int] = [:]
        /// The notes in the order they were made; a note whose point is no longer its key's is stale.
        private var order: [StampedKey] = []
        private var head = 0

        /// The point `key` is fresh from, when it is remembered.
        func point(of key: Key) -> Int? {
            points[key]
        }

        /// Whether `key` is remembered.
        func contains(_ key: Key) -> Bool {
            points[key] != nil
        }

        /// Notes that `key` is fresh from `point`; returns the keys forgotten to stay within ``limit``.
        mutating func note(_ key: Key, from point: Int) -> [Key] {
            points[key] = max(points[key] ?? 0, point)
            order.append(StampedKey(key: key, stamp: point))
            var forgotten: [Key] = []
            while points.count > Self.limit, head < order.count {
                let oldest = order[head]
                head += 1
                if points[oldest.key] == oldest.stamp {
                    points[oldest.key] = nil
                    forgotten.append(oldest.key)
                }
            }
            if head > 64, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
            return forgotten
        }

        /// Forgets every key (a clear); returns them.
        mutating func removeAll() -> [Key] {
            defer { self = RefreshedKeys() }
            return Array(points.keys)
        }
    }
}
