extension StoreMachine {
    /// What is under way for one key: its fetches in flight, its optimistic changes, its changes running or waiting
    /// for their turn, its level writes not issued yet and its saves not landed. Any of them holds the key's entry in
    /// use (the machine's first invariant). One part of the entry rather than five, so that the question every event
    /// that may drop the entry asks (``isDone``) is one look at the entry: each look at a field of the entry, a
    /// class, is checked for exclusive access at run time.
    struct KeyWork: Sendable {
        /// Fetches in flight, and the newest whose value was confirmed.
        var fetches = FetchesInFlight()
        /// Optimistic changes not settled yet, and what the key showed with them last.
        var pending = PendingChanges()
        /// The key's turn: the change applying now and the changes waiting for it.
        var turn = KeyTurn()
        /// Level writes decided and not issued yet, and debounced writes waiting for their timers.
        var writes = LevelWrites()
        /// Level saves issued and not landed yet, and whether the levels hold the newest value the store tried to
        /// save: the entry is kept until they land and one does (a save of a stale value is recorded stale when it
        /// lands, as the level stamps it with its own time; a save that fails keeps the value here).
        var saves = LevelSaves()

        /// Whether nothing is under way: the key's value, if any, may live in the levels alone.
        var isDone: Bool {
            fetches.isEmpty && pending.isEmpty && turn.isFree && writes.isSettled && saves.isSettled
        }

        // The lists filled while work is under way take their storage from the machine's spares and give it back
        // once empty; each step below is one look at the entry's work, storage and list together.

        /// A fetch begins, newest of all (see ``FetchesInFlight/begin(id:generation:logStart:sentMark:caller:)``).
        mutating func beginFetch(
            id: Int, generation: Int, logStart: Int, sentMark: Int, caller: FetchCaller, spare: inout [Fetch]
        ) {
            fetches.takeStorage(from: &spare)
            fetches.begin(id: id, generation: generation, logStart: logStart, sentMark: sentMark, caller: caller)
        }

        /// A change waits for the key's turn (see ``KeyTurn/enqueue(_:askedAt:)``).
        mutating func enqueue(_ job: Job, askedAt point: Int, spare: inout SlotQueue<Job>.Storage) {
            turn.takeStorage(from: &spare)
            turn.enqueue(job, askedAt: point)
        }

        /// The key's turn ends, no change waiting (see ``KeyTurn/end()``).
        mutating func endTurn(spare: inout SlotQueue<Job>.Storage) {
            turn.end()
            turn.giveStorage(to: &spare)
        }

        /// A level operation is decided, after those decided before (see ``LevelWrites/append(_:)``).
        mutating func decide(_ operation: consuming LevelOp, spare: inout [LevelOp]) {
            writes.takeStorage(from: &spare)
            writes.append(operation)
        }

        /// The level operations waiting, taken for the caller issuing them (see ``LevelWrites/takeOps()``); the
        /// saves they issue count among those in flight (`debounced`: the debounced levels).
        mutating func takeLevelOps(spare: inout [LevelOp], debounced: Set<Int>) -> InlineFirstArray<LevelOp> {
            let ops = writes.takeOps()
            writes.giveStorage(to: &spare)
            if let first = ops.head { countSaves(in: first, debounced: debounced) }
            for operation in ops.tail { countSaves(in: operation, debounced: debounced) }
            return ops
        }

        /// The level operation waiting when it is the only one (see ``LevelWrites/takeOnlyOp()``), its saves counted
        /// among those in flight.
        mutating func takeOnlyLevelOp(spare: inout [LevelOp], debounced: Set<Int>) -> LevelOp? {
            guard let only = writes.takeOnlyOp() else { return nil }
            writes.giveStorage(to: &spare)
            countSaves(in: only, debounced: debounced)
            return only
        }

        /// Counts the level saves `operation` issues into the saves in flight (the entry is kept until they land);
        /// the debounced levels (`debounced`) are not saved to by an operation that skips them.
        private mutating func countSaves(in operation: LevelOp, debounced: Set<Int>) {
            switch operation {
            case .save(_, _, let targets, let skipsDebounced, _, _, let mark):
                let count = skipsDebounced ? targets.count { !debounced.contains($0) } : targets.count
                saves.issue(count, version: mark.version)
            case .flush(_, _, _, _, let mark): saves.issue(1, version: mark.version)
            case .remove(let targets, _, _, let mark): saves.issue(targets.count, version: mark.version)
            case .waitForSaves: break
            }
        }

        /// Whether what the store confirmed is what the key shows, and stays so while a read looks: no optimistic
        /// change to apply over it, no change of it running or waiting (a hit's question, one look).
        var showsConfirmed: Bool {
            pending.isEmpty && turn.isFree
        }
    }
}
