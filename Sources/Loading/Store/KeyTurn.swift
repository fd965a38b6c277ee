extension StoreMachine {
    /// A key's turn: the changes of its confirmed value apply one at a time, in the order they were asked. The caller
    /// that finds the turn free takes it and runs the queue; others queue their change and leave. Each change keeps
    /// when it was asked, in the store's order (`asking`, while it applies): a fetch applies again only the changes
    /// asked while it was in flight, and a change asked after an invalidation makes the value fresh.
    struct KeyTurn: Sendable {
        /// Whether a caller has the turn (it runs the queue until it is empty).
        private(set) var isTaken = false
        /// When the change applying now was asked.
        private(set) var asking = 0
        /// The changes waiting, each with when it was asked (as its id). None inline: a change applied at once
        /// never waits, and every entry keeps its turn (a job is 96 bytes).
        private var queue = SlotQueue<Job>()
        /// Whether the head of `queue` runs now, outside the lock (a ``Work``): it stays at the head until committed.
        private var headRuns = false

        /// Whether no caller has the turn and no change waits for it: a change may apply at once.
        var isFree: Bool { !isTaken && queue.isEmpty }

        /// Whether changes wait in the queue.
        var hasQueued: Bool { !queue.isEmpty }

        /// The change at the head of the queue, next to apply.
        var head: Job? { queue.first?.element }

        /// Takes the turn for the caller; `false` when another caller has it.
        mutating func take() -> Bool {
            guard !isTaken else { return false }
            isTaken = true
            return true
        }

        /// Gives the turn up, once the queue is empty.
        mutating func end() {
            precondition(queue.isEmpty, "A key's turn ends while changes wait for it")
            isTaken = false
        }

        /// Takes `spare`'s storage for the queue when it has none, before a change is queued (see
        /// ``giveStorage(to:)``).
        mutating func takeStorage(from spare: inout SlotQueue<Job>.Storage) {
            queue.takeStorage(from: &spare)
        }

        /// Lets go of the queue's storage once it is empty: to `spare`, for the next key whose changes wait, when
        /// that has none. A key holds no room for waiting changes between them.
        mutating func giveStorage(to spare: inout SlotQueue<Job>.Storage) {
            queue.giveStorage(to: &spare)
        }

        /// A change asked at `point` applies now, at once.
        mutating func apply(askedAt point: Int) {
            asking = point
        }

        /// Puts `job`, asked at `point`, last in the queue.
        mutating func enqueue(_ job: Job, askedAt point: Int) {
            queue.append(job, id: point)
        }

        /// Takes the head of the queue off to apply it: `asking` is when it was asked.
        mutating func takeHead() -> Job {
            guard let (asked, job) = queue.popFirst() else {
                preconditionFailure("A key's change is taken off an empty queue")
            }
            headRuns = false
            asking = asked
            return job
        }

        /// The head of the queue runs now, outside the lock: a removal or a clear leaves it at the head, where its
        /// commit judges it.
        mutating func headStartsRunning() {
            headRuns = true
        }

        /// Puts `job`, taken off last, back at the head, asked when it was (a settle that runs again on what is
        /// confirmed after a removal).
        mutating func putBack(_ job: Job) {
            queue.prepend(job, id: asking)
        }

        /// Takes the queued jobs `drops` picks out of the queue, in order, except the head while it runs.
        mutating func drop(where drops: (Job) -> Bool) -> [Job] {
            let headRuns = headRuns
            var isHead = true
            return queue.removeAll { _, job in
                defer { isHead = false }
                return drops(job) && !(isHead && headRuns)
            }
        }
    }
}
