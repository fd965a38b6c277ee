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
    }
}
