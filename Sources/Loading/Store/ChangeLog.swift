extension StoreMachine {
    /// The changes of a key confirmed while fetches of it were in flight, to apply again to what those fetches bring
    /// (last asked wins: a fetch sent before a change does not undo it). Each is numbered by when it was asked, in the
    /// store's order, and keeps the generation it was confirmed in: a fetch applies again only the changes of its
    /// own generation asked after it began. A change confirmed while no fetch is in flight is not logged; only when
    /// it was asked is kept, so that a fetch beginning later counts from after it.
    struct ChangeLog: Sendable {
        private var changes: [LoggedChange] = []
        /// When the newest change confirmed while no fetch was in flight was asked.
        private(set) var lastUnlogged = 0

        /// Whether no change is logged.
        var isEmpty: Bool { changes.isEmpty }

        /// A change asked at `asked` was confirmed while no fetch was in flight.
        mutating func skip(askedAt asked: Int) {
            lastUnlogged = max(lastUnlogged, asked)
        }

        /// Logs `change`, asked at `asked` and confirmed in `generation`, while fetches are in flight.
        mutating func append(_ change: @escaping Change, askedAt asked: Int, generation: Int) {
            changes.append(LoggedChange(sequence: asked, generation: generation, change: change))
        }

        /// Whether a change made while `fetch` was in flight was logged.
        func hasChanges(for fetch: Fetch) -> Bool {
            changes.contains(where: fetch.appliesAgain)
        }

        /// The changes to apply again to what `fetch` brings, in the order they were asked.
        func changes(for fetch: Fetch) -> [Change] {
            changes.filter(fetch.appliesAgain).map { $0.change }
        }

        /// Forgets the changes no fetch in flight needs: those asked at or before `oldestStart` (every change when no
        /// fetch is in flight, `nil`).
        mutating func trim(keepingAfter oldestStart: Int?) {
            guard let oldestStart else {
                changes = []
                return
            }
            changes.removeAll { $0.sequence <= oldestStart }
        }
    }

    /// A change confirmed while fetches were in flight, numbered in order, with the generation of the key it was
    /// confirmed in: a fetch applies again only the changes of its own generation.
    struct LoggedChange: Sendable {
        init(sequence: Int, generation: Int, change: @escaping Change) {
            self.sequence = sequence
            self.generation = generation
            self.change = change
        }

        let sequence: Int
        let generation: Int
        let change: Change
    }
}
