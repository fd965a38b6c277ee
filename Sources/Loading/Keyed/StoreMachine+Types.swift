#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What the store knows of one key in use.
    @usableFromInline
    struct Entry: Sendable {
        /// The confirmed value, when `isKnown`.
        @usableFromInline var confirmed: StoredValue<Value>?
        /// Whether `confirmed` is the truth; when not, the levels hold it.
        @usableFromInline var isKnown = false
        @usableFromInline var pending: [Mutation] = []
        /// The version of the last response published for the key.
        @usableFromInline var version = 0
        var generation: Int
        var confirmedVersion = 0
        var observers = 0
        var levelReads = 0
        /// Fetches in flight, oldest first.
        var fetches: [Fetch] = []
        /// The id of the newest fetch whose value was confirmed.
        var lastConfirmedFetch = 0
        /// Changes confirmed while fetches were in flight, to apply again to what they bring.
        var log: [(sequence: Int, change: Change)] = []
        var logSequence = 0
        /// Changes waiting for the one running (`isChanging`), in the order they were asked.
        var queue: [Job] = []
        var isChanging = false
        /// Level operations decided and not yet issued, and whether a caller is issuing them.
        var levelOps: [LevelOp] = []
        var isIssuing = false
        /// Debounced writes waiting for their timer, by level.
        var debounced: [Int: DebouncedWrite] = [:]
        /// Set while the entry counts among the kept values.
        var keptStamp: Int?
        /// The subject the key's observers subscribe to, while it has observers.
        @usableFromInline var subject: Subject?

        init(generation: Int) {
            self.generation = generation
        }

        /// Whether observers are shown a value: a known one, or pending changes.
        var showsSomething: Bool { confirmed != nil || !pending.isEmpty }

        /// Whether nothing needs the entry: its value, if any, lives in the levels.
        var isIdle: Bool {
            observers == 0 && levelReads == 0 && fetches.isEmpty && pending.isEmpty && queue.isEmpty && !isChanging
                && levelOps.isEmpty && !isIssuing && debounced.isEmpty
        }
    }

    /// An optimistic change waiting for its commit.
    @usableFromInline
    struct Mutation: Sendable {
        let id: Int
        @usableFromInline let change: Change
        var commit: PendingLoad<Void>?

        init(id: Int, change: @escaping Change) {
            self.id = id
            self.change = change
        }
    }

    /// A fetch in flight and the callers waiting for it.
    struct Fetch: Sendable {
        let id: Int
        let generation: Int
        /// Logged changes with a greater sequence number were made after the fetch started.
        let logStart: Int
        var callers: [(id: Int, completion: FetchCompletion)]
        var token: (any CancellationToken)?
        /// Every caller left before the token was kept: the token is cancelled when it is.
        var isAbandoned = false
    }

    /// Whether the levels are read for a key, or what the store knows answers instead (`nil`: a miss).
    enum LevelRead {
        case read(ReadStamp)
        case known(Snapshot?)
    }

    /// What a level read knew of its key when it started.
    struct ReadStamp: Sendable {
        let generation: Int
        let confirmedVersion: Int
    }

    /// A change of a key's confirmed value, queued per key.
    enum Job: Sendable {
        /// A value written (a live update, a local edit).
        case write(StoredValue<Value>)
        /// A transform of the confirmed value.
        case update(Change)
        /// What fetch `fetch` brought.
        case fetched(Value, fetch: Int)
        /// What level `level` held, read under `stamp`, shown with `error` attached (the failure of the fetch it
        /// stands in for); `reply` receives the answer of the read.
        case hit(CachedValue<Value>, level: Int, stamp: ReadStamp, error: (any Error)?, reply: HitReply)
        /// An optimistic change's commit finished (or was cancelled).
        case settle(mutation: Int, accepted: Bool)
        /// Nothing but making the key known (an optimistic change shown over the levels' value).
        case load

        /// Whether the job applies a change to the confirmed value, which must be read from the levels first
        /// when the key is not known.
        var needsBase: Bool {
            switch self {
            case .update, .load, .settle(_, accepted: true): true
            case .write, .fetched, .hit, .settle: false
            }
        }

        /// The value the job's changes apply to.
        func base(in entry: Entry) -> Value? {
            switch self {
            case .write(let stored): stored.value
            case .fetched(let value, _): value
            case .hit(let cached, _, _, _, _): cached.value
            case .update, .settle, .load: entry.confirmed?.value
            }
        }

        /// The closures to run outside the lock on ``base(in:)``; `nil` when there are none.
        func changes(in entry: Entry) -> [Change]? {
            switch self {
            case .update(let change):
                return [change]
            case .settle(let id, accepted: true):
                return entry.pending.first { $0.id == id }.map { [$0.change] }
            case .fetched(_, let id):
                guard let start = entry.fetches.first(where: { $0.id == id })?.logStart else { return nil }
                let changes = entry.log.filter { $0.sequence > start }.map(\.change)
                return changes.isEmpty ? nil : changes
            case .write, .hit, .settle, .load:
                return nil
            }
        }

        /// Whether a removal or a clear drops the job unapplied (it was asked before them); the others are
        /// judged stale when they run, and answer their callers.
        var isDroppedByRemoval: Bool {
            switch self {
            case .write, .update, .load: true
            case .fetched, .hit, .settle: false
            }
        }
    }

    /// Closures to run outside the lock, on `base`, for the change at the head of a key's queue.
    struct Work: Sendable {
        let generation: Int
        let base: Value?
        let changes: [Change]

        /// The changes applied in order.
        func run() -> Value? {
            changes.reduce(base) { value, change in change(value) }
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

    /// A write or removal for a key's levels.
    enum LevelOp: Sendable {
        case save(Value, levels: [Int])
        case remove
    }

    struct DebouncedWrite: Sendable {
        let id: Int
        let value: Value
        var timer: any CancellationToken
    }

    /// A clear whose `removeAll` is not issued yet.
    struct Clearing: Sendable {
        var completions: [@Sendable () -> Void] = []
        /// Whether a caller was told to issue the `removeAll`.
        var isAssigned = false
    }

    /// What the store performs after unlocking, in this order: release the garbage, cancel, fail the cleared
    /// commits, publish, schedule the debounced writes, issue the level operations, reply.
    struct Effects {
        var publish: [Snapshot] = []
        var fetchReplies: [(FetchCompletion, Result<Snapshot, any Error>)] = []
        var hitReplies: [(HitReply, Snapshot)] = []
        var garbage: [Any] = []
        var cancels: [any CancellationToken] = []
        var failedCommits: [PendingLoad<Void>] = []
        var debounce: [(level: Int, id: Int, value: Value)] = []
        /// Whether the caller issues the key's level operations (see ``StoreMachine/takeLevelOps(of:)``).
        var issueLevels = false
        /// Whether the caller issues a clear's `removeAll`.
        var removeAll = false
    }

    /// What a key shows, captured under the lock and computed outside it (the pending changes run then).
    @usableFromInline
    struct Snapshot: Sendable {
        @usableFromInline let key: Key
        @usableFromInline let version: Int
        @usableFromInline let confirmed: StoredValue<Value>?
        @usableFromInline let changes: [Change]
        @usableFromInline let error: (any Error)?
        /// The key's subject when it has observers: where the snapshot is published.
        @usableFromInline let subject: Subject?

        @inlinable
        init(
            key: Key, version: Int, confirmed: StoredValue<Value>?, changes: [Change], error: (any Error)?,
            subject: Subject?
        ) {
            self.key = key
            self.subject = subject
            self.version = version
            self.confirmed = confirmed
            self.changes = changes
            self.error = error
        }

        @inlinable
        init(key: Key, entry: Entry, version: Int, error: (any Error)? = nil) {
            self.init(
                key: key, version: version, confirmed: entry.confirmed, changes: entry.pending.map { $0.change },
                error: error, subject: entry.subject)
        }

        @inlinable
        var response: StoreResponse<Value> {
            StoreResponse(
                value: changes.reduce(confirmed?.value) { value, change in change(value) },
                origin: changes.isEmpty ? confirmed?.origin ?? .local : .local,
                savedAt: confirmed?.savedAt,
                hasPendingChanges: !changes.isEmpty,
                error: error,
                version: version)
        }
    }
}

extension Array {
    /// The elements that satisfy `belongs`, and the others, each in their order.
    func partitioned(by belongs: (Element) -> Bool) -> (matching: [Element], others: [Element]) {
        var matching: [Element] = []
        var others: [Element] = []
        for element in self {
            if belongs(element) { matching.append(element) } else { others.append(element) }
        }
        return (matching, others)
    }
}
