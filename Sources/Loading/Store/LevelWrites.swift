extension StoreMachine {
    /// A key's level writes not issued yet: the operations decided, in the order the changes that decided them were
    /// made, whether a caller is issuing them (one at a time, see ``LevelIssuing``), and the debounced writes waiting
    /// for their timers, one per level (a newer write replaces the one waiting). While any of these is there, a level
    /// read of the key is behind what the store confirmed.
    ///
    /// A debounced level gets one save of the key at a time: a write whose timer ends while the level still saves an
    /// earlier one waits for it to land (replaced meanwhile by any newer write), so that a slow level saves the latest
    /// value next instead of every value in between.
    struct LevelWrites: Sendable {
        /// None inline: every entry keeps its level writes, and an operation is about a hundred bytes. The storage
        /// goes back to the machine once they are issued (``giveStorage(to:)``), for the next key's operations.
        private var ops: [LevelOp] = []
        /// Whether a caller is issuing the key's operations.
        private(set) var isIssuing = false
        private var debounced: [Int: DebouncedWrite] = [:]
        /// The debounced levels' saves of the key on their way, by level.
        private var saving: [Int: Int] = [:]
        /// The debounced levels whose write's timer ended while a save was on its way: it is issued when that lands.
        private var due: Set<Int> = []

        /// Whether nothing waits: no operation, no caller issuing, no debounced write.
        var isSettled: Bool { ops.isEmpty && !isIssuing && debounced.isEmpty }

        /// Whether operations wait to be issued.
        var hasOps: Bool { !ops.isEmpty }

        /// Whether debounced writes wait for their timers.
        var hasDebounced: Bool { !debounced.isEmpty }

        /// Whether `level` may not hold what the store confirmed yet: a write for it waits or is being issued.
        func isBehind(at level: Int) -> Bool {
            debounced[level] != nil || !ops.isEmpty || isIssuing
        }

        /// Decides one more operation, issued after those decided before.
        mutating func append(_ operation: consuming LevelOp) {
            ops.append(operation)
        }

        /// Gives the first operation waiting for its place in the processes' order that place (see
        /// ``SaveMark/wanted``), if one waits.
        mutating func place(at place: UInt64) {
            if let index = ops.firstIndex(where: { $0.wantsPlace }) { ops[index].place(at: place) }
        }

        /// Takes every operation waiting, in order, for the caller issuing them. A single one is taken alone (the
        /// list keeps its storage, for ``giveStorage(to:)``).
        mutating func takeOps() -> InlineFirstArray<LevelOp> {
            guard ops.count > 1 else { return InlineFirstArray(head: ops.popLast()) }
            return InlineFirstArray(exchange(&ops, with: []))
        }

        /// Takes the operation waiting when it is the only one (a change applied at once, issued by its caller).
        mutating func takeOnlyOp() -> LevelOp? {
            ops.count == 1 ? ops.popLast() : nil
        }

        /// Takes `spare`'s storage when the list has none, before an operation is decided: storage another key's
        /// list gave back, so that this one makes none.
        mutating func takeStorage(from spare: inout [LevelOp]) {
            if ops.capacity == 0 { swap(&ops, &spare) }
        }

        /// Lets go of the list's storage once no operation waits: to `spare` when that has none, else for good. A key
        /// holds no room for level operations between them.
        mutating func giveStorage(to spare: inout [LevelOp]) {
            guard ops.isEmpty, ops.capacity > 0 else { return }
            if spare.capacity == 0 { swap(&ops, &spare) } else { ops = [] }
        }

        /// A caller issues the key's operations now.
        mutating func startIssuing() {
            isIssuing = true
        }

        /// The caller issuing them found none left.
        mutating func stopIssuing() {
            isIssuing = false
        }

        /// Makes `write` wait for its timer at `level`; returns the timer of the write it replaces.
        mutating func debounce(_ write: DebouncedWrite, at level: Int) -> (any CancellationToken)? {
            debounced.updateValue(write, forKey: level)?.timer
        }

        /// Keeps the running `timer` of debounced write `id` at `level`; `false` when that write no longer waits.
        mutating func keepTimer(_ timer: any CancellationToken, ofWrite id: Int, level: Int) -> Bool {
            guard debounced[level]?.id == id else { return false }
            debounced[level]?.timer = timer
            return true
        }

        /// The timer of debounced write `id` at `level` fired: the write becomes an operation, when it still waits.
        /// Returns its timer, to release after unlocking.
        /// While the level saves an earlier write, the write waits for it to land instead (`nil`).
        mutating func fire(_ id: Int, level: Int) -> (any CancellationToken)? {
            guard let write = debounced[level], write.id == id else { return nil }
            guard saving[level, default: 0] == 0 else {
                due.insert(level)
                return nil
            }
            debounced[level] = nil
            appendFlush(of: write, at: level, ticket: nil)
            return write.timer
        }

        /// A save of the debounced write at `level` landed: the write that waited for it, if any, becomes an
        /// operation (`issues`, for the caller to issue). Returns that write's timer, to release after unlocking.
        mutating func flushLanded(at level: Int) -> (issues: Bool, timer: (any CancellationToken)?) {
            endSave(at: level)
            guard saving[level] == nil, due.remove(level) != nil, let write = debounced.removeValue(forKey: level)
            else { return (false, nil) }
            appendFlush(of: write, at: level, ticket: nil)
            return (true, write.timer)
        }

        private mutating func appendFlush(of write: DebouncedWrite, at level: Int, ticket: SaveTicket?) {
            saving[level, default: 0] += 1
            ops.append(.flush(write.value, savedAt: write.savedAt, level: level, ticket: ticket, mark: write.mark))
        }

        /// A debounced write's save at `level` landed, or will never be issued.
        private mutating func endSave(at level: Int) {
            saving[level, default: 1] -= 1
            if saving[level] == 0 { saving[level] = nil }
        }

        /// Turns every debounced write into an operation now, in the order of their levels, each holding `ticket`
        /// once; returns their timers, to cancel.
        mutating func flushDebounced(holding ticket: SaveTicket) -> [any CancellationToken] {
            var timers: [any CancellationToken] = []
            due = []
            for (level, write) in exchange(&debounced, with: [:]).sorted(by: { $0.key < $1.key }) {
                ticket.hold()
                appendFlush(of: write, at: level, ticket: ticket)
                timers.append(write.timer)
            }
            return timers
        }

        /// Drops the debounced write waiting at `level` (a newer value is saved there at once); returns its timer.
        mutating func dropDebounced(at level: Int) -> (any CancellationToken)? {
            due.remove(level)
            return debounced.removeValue(forKey: level)?.timer
        }

        /// Drops every debounced write (the value is removed); returns their timers, to cancel.
        mutating func dropDebounced() -> [any CancellationToken] {
            due = []
            return exchange(&debounced, with: [:]).values.map { $0.timer }
        }

        /// Drops everything waiting (a clear): returns the operations, whose tickets the caller releases, and the
        /// debounced writes' timers, to cancel. A caller issuing goes on, and finds none.
        ///
        /// For another process's logout made at `logout` in the processes' order, when the latest save or removal
        /// waiting was made after it (the next user's change, `outlives`), the saves and removals made after it stay,
        /// with the flushes' waits, and are issued once the clear emptied the levels.
        mutating func removeAll(
            keepingChangesAfter logout: UInt64? = nil
        ) -> (ops: [LevelOp], timers: [any CancellationToken], outlives: Bool) {
            var dropped = ops.isEmpty ? [] : exchange(&ops, with: [])
            var outlives = false
            if let logout, let latest = dropped.last(where: { $0.changesLevels }), latest.isPlaced(after: logout) {
                outlives = true
                for operation in exchange(&dropped, with: []) {
                    if operation.isPlaced(after: logout) || operation.isFlushWait {
                        ops.append(operation)
                    } else {
                        dropped.append(operation)
                    }
                }
            }
            // Never issued: their levels are not saving them.
            for case .flush(_, _, let level, _, _) in dropped { endSave(at: level) }
            return (dropped, dropDebounced(), outlives)
        }
    }
}
