#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's turn: the part that runs its changes one at a time (`KeyTurn`), then what waits for it: the jobs queued,
// the work a change computes outside the lock, and the step the caller running the queue takes next.

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

extension StoreMachine {
    /// A change of a key's confirmed value, queued per key.
    enum Job: Sendable {
        /// A value written (a live update, a local edit).
        case write(StoredValue<Value>)
        /// A transform of the confirmed value. With a `reply`, the transform adds what the network brought (a page
        /// appended to a list): its result is the network's, written to every level at once (debounced ones too),
        /// and `reply` receives what the key shows once it is saved (a failure when a removal or a clear drops it).
        /// Unless `replays`, a fetch in flight does not apply it again to what it brings (a copy of an entity
        /// another key learned: what the fetch brings is learned later). Its confirmation comes from `source`.
        case update(Change, reply: FetchCompletion?, replays: Bool, source: ConfirmationSource = .change)
        /// What fetch `fetch` brought.
        case fetched(Value, fetch: Int)
        /// What level `level` held, read under `stamp` (`stale` when invalidated since it was saved), shown with
        /// `error` attached (the failure of the fetch it stands in for); `reply` receives the answer of the read.
        case hit(
            CachedValue<Value>, level: Int, stamp: ReadStamp, staleSince: Int?, error: (any Error)?, reply: HitReply)
        /// What shared level `level` holds (`nil`: nothing), read under `stamp` on learning that another process
        /// changed the key there.
        case external(CachedValue<Value>?, level: Int, stamp: ReadStamp)
        /// An optimistic change's commit finished (or was cancelled); `ticket` is released once the change is
        /// saved to the levels (at once when it is not confirmed). An accepted change does `replacing`'s change of
        /// its own id, if any, and the other pending changes named there do theirs from then on (an id the server
        /// gave, written into them): all shown in the one publication of the settle.
        case settle(mutation: Int, accepted: Bool, ticket: SaveTicket?, replacing: Replacement?)
        /// Nothing but making the key known (an optimistic change shown over the levels' value).
        case load
        /// Write the key's debounced writes now; `ticket` is released once they are saved.
        case flush(SaveTicket)
        /// A read waiting for the changes asked before it: `reply` is called when its turn comes (the read then
        /// answers with what they made).
        case barrier(reply: @Sendable () -> Void)
        /// An optimistic change asked while the key's changes run or wait: shown when its turn comes, after them.
        case add(Mutation)
        /// Each pending change named now does the change given (queued changes whose inputs were rewritten: an id
        /// the server gave); each keeps its place and its commit, and the key shows them in one publication.
        case replace(Replacement)
        /// The server's copy of the key's value, answered to pending change `mutation` as a conflict: confirmed and
        /// written to every level like a write, with the change (and the others) still shown over it; nothing when
        /// the change is no longer pending (settled, or dropped by a clear).
        case serverCopy(StoredValue<Value>, underMutation: Int)

        /// Whether the job applies a change to the confirmed value, which must be read from the levels first
        /// when the key is not known.
        var needsBase: Bool {
            switch self {
            case .update, .load, .settle(_, accepted: true, _, _): true
            case .write, .fetched, .hit, .external, .settle, .flush, .barrier, .add, .replace, .serverCopy: false
            }
        }

        /// Whether the job ends a level read (counted in ``Entry/levelReads`` while it ran).
        var endsLevelRead: Bool {
            switch self {
            case .hit, .external: true
            case .write, .update, .fetched, .settle, .load, .flush, .barrier, .add, .replace, .serverCopy: false
            }
        }

        /// The value the job's changes apply to.
        func base(in entry: Entry) -> Value? {
            switch self {
            case .write(let stored): stored.value
            case .serverCopy(let stored, let mutation):
                entry.work.pending.mutation(mutation) != nil ? stored.value : entry.confirmed.value?.value
            case .fetched(let value, _): value
            case .hit(let cached, _, _, _, _, _): cached.value
            case .external(let cached, _, _): cached?.value
            case .update, .settle, .load, .flush, .barrier, .add, .replace: entry.confirmed.value?.value
            }
        }

        /// The closures to run outside the lock on ``base(in:)``; `nil` when there are none.
        func changes(in entry: Entry) -> Changes? {
            switch self {
            case .update(let change, _, _, _):
                return Changes(change)
            case .settle(let id, accepted: true, _, let replacing):
                if let replaced = replacing?.changes.first(where: { $0.mutation == id }),
                    entry.work.pending.mutation(id) != nil
                {
                    return Changes(replaced.change)
                }
                return entry.work.pending.mutation(id).map { Changes($0.change) }
            case .fetched(_, let id):
                guard let fetch = entry.work.fetches.fetch(id) else { return nil }
                return Changes(entry.log.changes(for: fetch))
            case .write, .hit, .external, .settle, .load, .flush, .barrier, .add, .replace, .serverCopy:
                return nil
            }
        }

        /// The answer of a job a removal or a clear dropped unapplied, when it has a caller waiting.
        var droppedReply: FetchReply? {
            guard case .update(_, let reply?, _, _) = self else { return nil }
            return FetchReply(completion: reply, result: .failure(StoreError.discarded))
        }

        /// Whether a removal or a clear drops the job unapplied (it was asked before them); the others are
        /// judged stale when they run, and answer their callers. A clear drops an optimistic change waiting to be
        /// shown too (``added``); a removal keeps it, as it keeps those shown.
        var isDroppedByRemoval: Bool {
            switch self {
            case .write, .update, .load, .serverCopy: true
            case .fetched, .hit, .external, .settle, .flush, .barrier, .add, .replace: false
            }
        }

        /// The optimistic change the job shows, if it is one.
        var added: Mutation? {
            guard case .add(let mutation) = self else { return nil }
            return mutation
        }
    }

    /// Closures to run outside the lock, on `base`, for the change at the head of a key's queue.
    /// Pending changes a queue rewrote (an id the server gave, written into them), each by its id, and how the value
    /// a key shows is rewritten alike, when the queue knows: the key then shows what it showed rewritten, without
    /// applying its changes again, when they were all made by ``shownUpTo`` (a number the machine gave before the
    /// server's id was known; see ``PendingChanges/replace(_:)``).
    /// A class: only queues that create items offline make one, and a settle's job stays small without it.
    final class Replacement: Sendable {
        let changes: [(mutation: Int, change: Change)]
        let rewritingShown: Change?
        let shownUpTo: Int

        init(changes: [(mutation: Int, change: Change)], rewritingShown: Change?, shownUpTo: Int) {
            self.changes = changes
            self.rewritingShown = rewritingShown
            self.shownUpTo = shownUpTo
        }
    }

    struct Work: Sendable {
        let generation: Int
        let base: Value?
        let changes: Changes

        /// The changes applied in order.
        func run() -> Value? {
            changes.apply(to: base)
        }
    }

    /// The closures of a change to run, in order: most changes have one, held as it is. A closure put in an array
    /// (or any generic container) is converted to the container's calling form, which allocates, and converted back
    /// to be called, which allocates again.
    struct Changes: Sendable {
        let first: Change
        let rest: [Change]

        init(_ first: @escaping Change) {
            self.first = first
            rest = []
        }

        /// `changes`, in order; `nil` when there is none.
        init?(_ changes: [Change]) {
            guard let first = changes.first else { return nil }
            self.first = first
            rest = Array(changes.dropFirst())
        }

        func apply(to base: Value?) -> Value? {
            var value = first(base)
            for change in rest { value = change(value) }
            return value
        }
    }

    /// What the caller that submitted a change (or finished one) does next.
    enum Step {
        /// The change was applied: perform the effects, then ask for the next step.
        case applied(Effects)
        /// Run the work outside the lock, then commit its result.
        case run(Work)
        /// Read the levels for the key's value, then commit it as the base.
        case loadBase(generation: Int)
        /// Another caller runs the key's changes: nothing to do.
        case queued
    }
}
