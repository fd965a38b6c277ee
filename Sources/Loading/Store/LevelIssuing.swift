extension StoreMachine {
    /// Who issues the keys' level operations, and a clear waiting for them: a clear empties the levels (`removeAll`)
    /// only once no caller is issuing operations decided before it, and the operations decided meanwhile wait (are
    /// held) until that `removeAll` is issued, so that none lands on the levels before it.
    ///
    /// Invariants: while a clear waits, no caller starts issuing; exactly one caller is told to issue its
    /// `removeAll` (the clear's, or the last to stop issuing); the held keys are handed back once, when it is issued.
    struct LevelIssuing: Sendable {
        /// The callers issuing level operations now (one per key at most: see ``LevelWrites/isIssuing``).
        private var issuing = 0
        /// Keys whose level operations wait for a clear's `removeAll`, in the order they were held.
        private var held: [Key] = []
        /// The callers of the clears waiting for the levels to be empty.
        private var completions: [@Sendable () -> Void] = []
        /// Whether a clear waits for its `removeAll` to be issued.
        private(set) var isClearing = false
        /// Whether a caller was told to issue that `removeAll`.
        private var isAssigned = false
        /// How many levels, fastest first, the clears waiting empty: every level, unless each of them is what
        /// another process made of a level they share (it is emptied already; the faster ones are).
        private(set) var levelsToEmpty = 0
        /// The place in the processes' order of the latest clear waiting that empties the shared level, given as the
        /// clear was made (`nil` or ``SaveMark/unplaced``: its `removeAll` takes one as it is issued).
        private(set) var place: UInt64?

        /// A caller would issue `key`'s level operations: `true` when it may, `false` when a clear holds them.
        mutating func start(_ key: Key) -> Bool {
            guard !isClearing else {
                hold(key)
                return false
            }
            issuing += 1
            return true
        }

        /// A caller stops issuing `key`'s level operations; `hasMore`: the key has operations it did not issue (a
        /// clear holds them). Returns whether that caller issues the clear's `removeAll` now.
        mutating func stop(_ key: Key, hasMore: Bool) -> Bool {
            precondition(issuing > 0, "A caller stops issuing level operations it did not start issuing")
            issuing -= 1
            guard isClearing else { return false }
            if hasMore { held.append(key) }
            return assignRemoveAll()
        }

        /// A clear of the first `levels` levels begins, or joins one waiting: `completion` is called once they are
        /// empty; one that empties the shared level has its `place` in the processes' order. Returns whether the
        /// caller issues the `removeAll` now (no caller is issuing operations).
        mutating func clear(
            levels: Int = .max, place: UInt64? = nil, completion: @escaping @Sendable () -> Void
        ) -> Bool {
            isClearing = true
            if let place { self.place = max(self.place ?? 0, place) }
            levelsToEmpty = max(levelsToEmpty, levels)
            completions.append(completion)
            return assignRemoveAll()
        }

        /// The clear's `removeAll` was issued: returns the callers waiting for it and the keys held meanwhile. The
        /// caller starts issuing those that still have operations (``resume(_:)``).
        mutating func removeAllIssued() -> (
            completions: [@Sendable () -> Void], held: [Key], levels: Int, place: UInt64?
        ) {
            precondition(isClearing, "A clear's removeAll is issued while no clear waits")
            isClearing = false
            isAssigned = false
            return (
                exchange(&completions, with: []), exchange(&held, with: []), exchange(&levelsToEmpty, with: 0),
                exchange(&place, with: nil)
            )
        }

        /// Callers start issuing the operations of `count` keys held by a clear.
        mutating func resume(_ count: Int) {
            issuing += count
        }

        private mutating func hold(_ key: Key) {
            if !held.contains(key) { held.append(key) }
        }

        private mutating func assignRemoveAll() -> Bool {
            guard issuing == 0, !isAssigned else { return false }
            isAssigned = true
            return true
        }
    }
}
