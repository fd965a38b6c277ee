#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// What the store holds of a key: its record and entry, the work that holds it in use (`KeyWork`),
// the table of entries by slot, and the bookkeeping that keeps, compacts or drops an entry once nothing needs it.

extension StoreMachine {
    /// What the store keeps of a key between uses: its truth, what it showed last, its stale mark and its place among
    /// the kept values. A key in use has an ``Entry``, which is this record with the work under way and the key's
    /// observers; a key that falls out of use with a value the store keeps is held as the record alone (about 160
    /// bytes, from the entry's 480), and made an entry again by its next event but a hit (see
    /// ``StoreMachine/EntryTable``). Reached only through the machine, which only the store's lock reaches (that lock
    /// is what makes it safe to send).
    class KeyRecord: @unchecked Sendable {
        /// The key's truth, when the store knows it (when not, the levels hold it).
        final var confirmed = ConfirmedValue()
        /// The version of the last response published for the key.
        final var version = 0
        final var generation: Int
        /// Set while the key counts among the kept values.
        final var keptStamp: Int?
        /// When the key's observation last began or ended, in the store's order: the key observed most recently
        /// is refreshed first within a budget (``Store/revalidate(within:clock:)``).
        final var observedAt = 0
        /// Whether the value is stale, and the refetch owed to the observers.
        final var staleness = Staleness()
        /// The record's key (for ``StoreMachine/entry(_:)``, which remembers the entry found last).
        final var key: Key

        init(key: Key, generation: Int) {
            self.key = key
            self.generation = generation
        }

        /// Makes the record what `other` keeps of its key, the confirmed value moved out of it: a kept key's entry
        /// made its record, or a record made its entry again. Each field set is checked for exclusive access.
        final func take(_ other: KeyRecord) {
            (key, generation, version) = (other.key, other.generation, other.version)
            (keptStamp, observedAt, staleness) = (other.keptStamp, other.observedAt, other.staleness)
            confirmed = exchange(&other.confirmed, with: ConfirmedValue())
        }
    }

    /// What the store knows of one key in use: its record, with the work under way and its observers. A reference,
    /// so that changing a field costs neither a copy of the entry nor a second lookup of its key. Its fields keep
    /// the run-time exclusivity checks of a class (about 80 instructions each look; some 30 looks and 2,500
    /// instructions of a first read, Benchmarks scenario 17), which the entry as a value in the slot table would make
    /// static; what holds it in use is one field (``KeyWork``) for that reason.
    final class Entry: KeyRecord, @unchecked Sendable {
        /// What is under way for the key, which holds the entry in use.
        var work = KeyWork()
        var observers = 0
        var levelReads = 0
        /// Changes confirmed while fetches were in flight, to apply again to what they bring.
        var log = ChangeLog()
        /// The subjects the key's observers subscribe to, while it has some (replaced, not changed: see
        /// ``StoreMachine/Observed``).
        var observed: Observed?
        /// How many of `observers` observe the key's states (``Store/states(for:)``); the others, its values.
        var stateObservers = 0
        /// What the key's state observers were shown last (loading, the latest failure).
        var shown = ShownStates()

        override init(key: Key, generation: Int) {
            super.init(key: key, generation: generation)
        }

        // A spare entry (``StoreMachine/spareEntry``) is made another key's by one of the two below: an idle entry
        // whose value went to its record, with no observer, level read or subject; what its key's work left in its
        // parts is reset (each field set is checked for exclusive access, so only those are).

        /// Makes the entry that of `record`'s key, back in use: what the record keeps (its confirmed value moved out
        /// of it), and no work.
        func resume(_ record: KeyRecord) {
            take(record)
            clearWork()
        }

        /// Makes the entry a new one of `key`, as ``init(key:generation:)`` would.
        func reset(key: Key, generation: Int) {
            (self.key, self.generation) = (key, generation)
            (version, keptStamp, observedAt, staleness) = (0, nil, 0, Staleness())
            clearWork()
        }

        private func clearWork() {
            work = KeyWork()
            log = ChangeLog()
            shown = ShownStates()
        }

        /// Whether letting go of the entry releases nothing of the caller's (a change it logged, a failure its state
        /// observers were shown, what it showed with changes now settled): then it may be let go of, or made another
        /// key's, under the lock.
        var holdsNothingOfTheCallers: Bool {
            log.isEmpty && !shown.holdsFailure && observed == nil && !work.pending.remembersShown
        }

        /// Whether observers are shown a value: a known one, or pending changes.
        var showsSomething: Bool { confirmed.value != nil || !work.pending.isEmpty }

        /// Whether the store fetches the key now. A fetch from before a removal or a clear does not count: what it
        /// brings is dropped.
        var isLoading: Bool {
            work.fetches.isLoading(generation: generation)
        }

        /// Whether nothing needs the entry: its value, if any, lives in the levels.
        var isIdle: Bool {
            observers == 0 && levelReads == 0 && work.isDone
        }
    }

    /// A key, and the stamp it took: its place in an order of keys (kept values, refreshed keys).
    struct StampedKey: Sendable {
        let key: Key
        let stamp: Int
    }

    /// What a key shows at one version, captured under the lock: the confirmed value as a response (built there,
    /// which runs no code of the caller's: the value is retained, not copied), and the pending changes, which are the
    /// caller's closures and are applied outside the lock (``response``), with where it is published.
    struct Snapshot: Sendable {
        /// The confirmed value at the snapshot's version (no value when none is confirmed), with the error attached.
        let confirmed: StoreResponse<Value>
        /// The optimistic changes shown over it, when there are some.
        let pending: ShownChanges?
        /// The key's subjects when it has observers: where the snapshot is published.
        let observed: Observed?
        /// Whether the confirmed value was invalidated and not fetched anew since.
        let isStale: Bool
        /// Whether the store fetches the key (for the state observers).
        let isLoading: Bool
        /// Whether only the state observers are told: a fetch of the key began, ended or failed (its value did not
        /// change).
        let isNotice: Bool

        init(entry: Entry, version: Int, error: (any Error)? = nil, isNotice: Bool = false) {
            confirmed = Self.confirmed(of: entry, version: version, error: error)
            pending = entry.work.pending.isEmpty ? nil : ShownChanges(entry: entry)
            observed = entry.observed
            isStale = entry.staleness.isStale
            isLoading = entry.observed?.states != nil && entry.isLoading
            self.isNotice = isNotice
        }

        /// What `slot`'s key shows at its version: a kept key shows its confirmed value, with no pending change,
        /// observer or fetch.
        init(_ slot: EntryTable.Slot, error: (any Error)? = nil, isNotice: Bool = false) {
            switch slot {
            case .inUse(let entry): self.init(entry: entry, version: entry.version, error: error, isNotice: isNotice)
            case .kept(let record): self.init(kept: record, error: error, isNotice: isNotice)
            }
        }

        private init(kept record: KeyRecord, error: (any Error)?, isNotice: Bool) {
            confirmed = Self.confirmed(of: record, version: record.version, error: error)
            (pending, observed, isLoading) = (nil, nil, false)
            isStale = record.staleness.isStale
            self.isNotice = isNotice
        }

        /// `record`'s confirmed value as a response (no value when none is confirmed), with `error` attached.
        private static func confirmed(
            of record: KeyRecord, version: Int, error: (any Error)?
        ) -> StoreResponse<Value> {
            let value = record.confirmed.value
            return StoreResponse(
                box: value?.value, origin: value?.origin ?? .local, savedAtSeconds: value?.savedAtSeconds,
                hasPendingChanges: false, error: error, version: version)
        }

        /// The version observers are shown.
        var version: Int { confirmed.version }

        /// What observers and readers are shown: the confirmed value, with the pending changes applied in order
        /// (from the prefix the key showed last, when it still holds).
        var response: StoreResponse<Value> {
            guard let pending else { return confirmed }
            let start = pending.prefix.map { $0.shown() } ?? confirmed.box
            return StoreResponse(
                box: pending.rest.reduce(start) { value, mutation in mutation.change(value) },
                origin: .local, savedAtSeconds: confirmed.storage.savedAtSeconds, hasPendingChanges: true,
                error: confirmed.error, version: confirmed.version)
        }

        /// What the key shows with every pending change, as a prefix the key remembers (see
        /// ``StoreMachine/remember(_:for:)``); `nil` when nothing new was applied or rewritten.
        func shownPrefix(_ response: StoreResponse<Value>) -> (
            key: Key, generation: Int, prefix: ShownPrefix
        )? {
            guard let pending, !pending.rest.isEmpty || pending.prefix?.rewrites.isEmpty == false else { return nil }
            return (
                pending.key, pending.generation,
                ShownPrefix(
                    confirmedVersion: pending.confirmedVersion, epoch: pending.epoch,
                    count: (pending.prefix?.count ?? 0) + pending.rest.count,
                    newest: pending.rest.reduce(pending.prefix?.newest ?? 0) { max($0, $1.id) }, value: response.box)
            )
        }
    }

    /// The subjects of a key's observers: of its values (``Store/changes(for:)``) and of its states
    /// (``Store/states(for:)``), each while it has such observers. Immutable, so that a snapshot takes both as one
    /// reference: the machine replaces it when a subject comes or goes (``StoreMachine/observe(_:changes:states:)``).
    final class Observed: Sendable {
        let changes: Subject?
        let states: StateSubject?

        init(changes: Subject?, states: StateSubject?) {
            self.changes = changes
            self.states = states
        }
    }

    /// The pending changes a snapshot shows: the prefix the key showed last, if it still holds, and the changes after
    /// it, with what identifies the list they come from.
    final class ShownChanges: Sendable {
        let key: Key
        /// The entry's generation: a slot given to another key since has an entry of another generation.
        let generation: Int
        let prefix: ShownPrefix?
        let rest: [Mutation]
        let confirmedVersion: Int
        let epoch: Int

        init(entry: Entry) {
            key = entry.key
            generation = entry.generation
            confirmedVersion = entry.confirmed.version
            epoch = entry.work.pending.epoch
            (prefix, rest) = entry.work.pending.start(confirmedVersion: confirmedVersion)
        }
    }
}

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

extension StoreMachine {
    /// What the store holds of each key, by slot: an entry is found by indexing, not hashing. A key in use has its
    /// ``Entry``; a key that fell out of use with a value the store keeps has its ``KeyRecord`` alone, which a hit
    /// reads and changes as it is and any other event of the key makes an entry again (``StoreMachine/entry(_:)``).
    struct EntryTable: Sequence, Sendable {
        /// What the table holds of one key.
        enum Slot: Sendable {
            case inUse(Entry)
            case kept(KeyRecord)

            /// What the key keeps, in use or not.
            var record: KeyRecord {
                switch self {
                case .inUse(let entry): entry
                case .kept(let record): record
                }
            }

            /// The key's entry, when it is in use.
            var entry: Entry? {
                if case .inUse(let entry) = self { entry } else { nil }
            }
        }

        private var slots: [Slot?] = []
        /// The number of keys held, in use or kept.
        private(set) var count = 0

        init() {}

        subscript(slot: Int) -> Slot? {
            get { slot < slots.count ? slots[slot] : nil }
            set {
                if slot >= slots.count { slots.append(contentsOf: repeatElement(nil, count: slot - slots.count + 1)) }
                switch (slots[slot] == nil, newValue == nil) {
                case (true, false): count += 1
                case (false, true): count -= 1
                default: break
                }
                slots[slot] = newValue
            }
        }

        /// The record of the key in `slot`, in use or kept.
        func record(at slot: Int) -> KeyRecord? {
            self[slot]?.record
        }

        /// The entry of the key in `slot`, when it is in use.
        func entry(at slot: Int) -> Entry? {
            self[slot]?.entry
        }

        mutating func removeValue(forKey slot: Int) -> KeyRecord? {
            guard let record = record(at: slot) else { return nil }
            self[slot] = nil
            return record
        }

        /// The slots that hold a key.
        var keys: [Int] {
            slots.indices.filter { slots[$0] != nil }
        }

        func makeIterator() -> Iterator {
            Iterator(slots: slots)
        }

        /// The keys held in the order of their slots.
        struct Iterator: IteratorProtocol {
            let slots: [Slot?]
            var index = 0

            mutating func next() -> (key: Int, value: Slot)? {
                while index < slots.count {
                    defer { index += 1 }
                    if let slot = slots[index] { return (index, slot) }
                }
                return nil
            }
        }
    }
}

extension StoreMachine {
    /// A change of `key` the app made confirmed. What the app writes is the latest it knows, as of when it asked: the
    /// key is fresh, unless an invalidation came after that (while the change waited for its turn or ran); then a
    /// refetch owed only for invalidations before it is settled all the same.
    mutating func changeMakesFresh(_ key: Key) {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        let asking = entry.work.turn.asking
        if asking > entry.staleness.mark { return makeFresh(key, from: asking) }
        entry.staleness.changeConfirmed(askedAt: asking)
    }

    /// `key`'s value is fresh from `point` in the store's order: not stale, and not judged stale by an older
    /// invalidation when only the levels hold it.
    mutating func makeFresh(_ key: Key, from point: Int) {
        entry(key, heldBecause: "a fresh value of the key was just confirmed").staleness.makeFresh()
        noteRefreshed(key, from: point)
    }

    mutating func log(_ change: @escaping Change, for key: Key) {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard !entry.work.fetches.isEmpty else {
            entry.log.skip(askedAt: entry.work.turn.asking)
            return
        }
        // Numbered by when it was asked: a fetch that began before applies it again, one that began after does not.
        entry.log.append(change, askedAt: entry.work.turn.asking, generation: entry.generation)
    }

    /// Forgets the logged changes no fetch in flight needs any more.
    mutating func trimLog(of key: Key) {
        let entry = entry(key, heldBecause: "a fetch of the key just ended")
        entry.log.trim(keepingAfter: entry.work.fetches.oldestLogStart())
    }

    /// A new version of what `key` shows: the snapshot its observers are sent, made only when it has observers or
    /// when it `answers` a caller as well (a snapshot holds its response: made for nobody, it would be an allocation
    /// for nothing).
    mutating func publish(_ key: Key, error: (any Error)? = nil, answers: Bool = false) -> Snapshot? {
        let entry = entry(key, heldBecause: "what the key shows just changed")
        entry.version = next()
        guard answers || entry.observed != nil else { return nil }
        let snapshot = Snapshot(entry: entry, version: entry.version, error: error)
        if entry.observed?.states != nil { entry.shown.showLoading(snapshot.isLoading) }
        return snapshot
    }

    /// What `key` shows, at its current version (a value of `nil` when it shows nothing).
    func shownNow(_ key: Key) -> Snapshot {
        guard let slot = slot(key) else { preconditionFailure("A key has no entry, yet what it shows is asked") }
        return Snapshot(slot)
    }

    /// Drops `key`'s entry when nothing needs it any more, unless its value is among the last `keptValues` to
    /// fall out of use. A kept key stays an entry until the next key falls out of use: then it is held as its record
    /// alone, and its entry is made the next key's (``compact(_:)``). A key used again and again (a list a page is
    /// added to, a key written in a burst) is not made a record and an entry on each use.
    mutating func release(_ key: Key) {
        guard let entry = peek(key), entry.isIdle else { return }
        guard keptValues > 0, entry.confirmed.value != nil else {
            drop(key)
            return
        }
        kept.keep(entry, key: key, stamp: next())
        letGoOfKeptValues(beyond: keptValues)
        if let previous = exchange(&lastKept, with: key), previous != key { compact(previous) }
    }

    /// Holds `key` as its record alone when it is kept and idle: its entry is made the next key's (``spareEntry``),
    /// unless it holds something of the caller's (then it is released after unlocking).
    private mutating func compact(_ key: Key) {
        guard let entry = entries.entry(at: key), entry.isIdle, entry.keptStamp != nil else { return }
        let record = spareRecord.take() ?? KeyRecord(key: key, generation: entry.generation)
        record.take(entry)
        entries[key] = .kept(record)
        if recent === entry { recent = nil }
        if spareEntry == nil, entry.holdsNothingOfTheCallers { spareEntry = entry } else { released.add(entry) }
    }

    /// Lets go of every kept value (the system asks for memory): the keys no longer in use are dropped, and their
    /// levels hold their values; a kept key back in use keeps its value and only stops counting as kept.
    mutating func dropKeptValues() {
        letGoOfKeptValues(beyond: 0)
    }

    /// Lets go of the oldest kept values until at most `bound` are kept: an entry no longer in use is dropped; each
    /// key is told as evicted when the store has events.
    private mutating func letGoOfKeptValues(beyond bound: Int) {
        while let key = kept.takeOldest(beyond: bound, of: entries) {
            if entries.entry(at: key)?.isIdle ?? true { drop(key) }
            if recordsEvictions {
                evicted.append(key)
                released.hasNotices = true  // told after unlocking (see ``takeEvictions()``)
            }
        }
    }

    mutating func drop(_ key: Key) {
        guard let record = entries.removeValue(forKey: key) else { return }
        dropped.append(key)
        if recent?.key == key { recent = nil }
        kept.forget(record)
        released.add(record)
    }
}
