#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a ``Store`` knows of its keys, and what must happen when something happens to one: a value with no lock, no
/// clock and no closure it runs. Each event is a method call (with the time it happened, where that matters); each
/// returns the actions the store performs after unlocking, in order (``Effects``). The store holds the machine
/// behind one lock and does nothing else under it, but give the changes of a level it shares with other processes
/// their places in the processes' order (``placesWanted``).
///
/// The machine is not generic: it knows a key by the slot the store gave it (``StoreKeys``) and a value as a box
/// (``StoreValueBox``), so it is compiled once, in this module, and runs as fast wherever the store is used; the
/// store's generic face maps keys to slots and boxes and unboxes values.
///
/// ## Invariants
/// - **One entry per key in use.** An entry exists while something needs it: an observer, a level read, a fetch, a
///   pending optimistic change, a queued change, a level operation not yet issued, a debounced write. Then it is
///   dropped, and the levels hold the key's value; or kept among the last `keptValues` values, as its record alone
///   (``KeyRecord``) once another key falls out of use, which a hit reads as it is and any other event of the key
///   makes an entry again.
/// - **Known or not.** An entry's confirmed value (``ConfirmedValue``, set in one place) is the truth only once it is
///   known; before, the levels hold it and the store reads them. An entry that is not known has no level operation
///   pending: level operations come only from confirmed changes, which make it known.
/// - **A generation** is a store-wide number an entry takes when it is made and anew on every removal and clear.
///   Whatever started under an older generation (a fetch, a level read, a change being computed) is stale when it
///   ends: it confirms nothing.
/// - **Confirmed versions** count the changes of an entry's confirmed value: a level read confirms its hit only if
///   the value did not change while it ran.
/// - **Versions** number what observers are shown, store-wide and only growing: an observer never takes an older
///   response after a newer one, even across entries that were dropped and made again.
/// - **Per key, one change at a time.** Every change of a confirmed value (a write, an update, a fetched value, a
///   level hit, a settled optimistic change) goes through its key's queue: the caller that finds the queue idle runs
///   it, and the changes queued meanwhile, in order. Removals and clears act at once and make what is queued or
///   running stale.
/// - **Per key, level operations in decision order.** They are issued by one caller at a time, in the order the
///   changes that decided them were made; a clear's `removeAll` is issued after every operation decided before it and
///   before any decided after it. Levels are not read while a change of the key runs; a level whose writes for the
///   key are not issued yet may be read, but its hit is older than the confirmed value and counts as a miss.
/// - **Last asked wins.** A fetch's value is confirmed only if no fetch started after it was confirmed first; changes
///   made while it was in flight are applied again to its value.
/// - **Stale marks.** An invalidation marks the entries it matches with a counter value (``Staleness``): a fetch
///   started after it (a greater id) or a write makes the value fresh again; an older fetch does not. Keys the store
///   does not hold are judged by the invalidation records (dates, and predicates evaluated outside the lock): a
///   level's value saved at or before a matching record is stale. Records beyond a limit fold into one date before
///   which everything is stale: more is refetched, never less. A level read holds its key's entry, so an
///   invalidation made while it runs marks that entry when it matches the key: the hit is stale by the records made
///   before the read or by a mark made during it, and an invalidation of other keys leaves it fresh.
/// - **Saved by intent.** Writes and updates (bursts of live changes) reach a debounced level when its timer fires or
///   a flush asks; a fetched value, a level's hit and a confirmed optimistic change are written to every level at
///   once, replacing a debounced write waiting. A fetch's callers and a confirmed change's completion are answered
///   once those writes have completed (or were dropped by a clear): their ``SaveTicket``.
///
/// ## Where the rules live
/// A key's part, and the events that chiefly change it, share a file: `StoreRead.swift` (a read, and its level
/// reads), `FetchesInFlight.swift` (fetches and their callers), `KeyTurn.swift` (a key's turn, and the jobs that
/// wait for it), `+Changes` (a change submitted, run and committed, what it confirms, and the confirmed value),
/// `+LevelOps` (level writes, the tickets that wait for them, and who issues them), `+Entry` (a key's record and
/// entry, what holds it in use, the table of them by slot, and dropping one), `+Invalidation` (stale marks, and
/// the keys to revalidate), `+States` (observers, of values and of states). Two reach every part: `+Clear`
/// (removal and clear) and `+Effects` (what the store does after unlocking).
///
/// Parts with state of their own keep it private and are tested alone (`StoreMachinePartsTests`). The store's:
/// ``KeptValues`` (the bound on values kept for keys no longer in use), ``InvalidationRecords`` (what invalidations
/// judge the levels' values by, with ``RefreshedKeys``), ``LevelIssuing`` (who issues level operations, and a clear
/// waiting for them). A key's: ``ConfirmedValue`` (its truth, counted by version, and the response its hits share),
/// ``KeyWork`` (what is under way for it, which holds its entry in use: ``KeyTurn``, its changes, one at a time;
/// ``FetchesInFlight``, its fetches; ``LevelWrites``, writes not issued yet; ``LevelSaves``, saves in flight;
/// ``PendingChanges``, its optimistic changes and what it showed last), ``ChangeLog`` (the changes its fetches apply
/// again), ``Staleness`` (its stale mark and the refetch it owes) and ``ShownStates`` (what its state observers were
/// shown). The lists a key fills only while work is under way (its fetches, waiting changes and level operations)
/// take their storage from the machine's spares and give it back once empty: a key held between uses keeps none, and
/// the next key's work makes none.
struct StoreMachine: Sendable {
    /// A key, by the slot the store gave it (see ``StoreKeys``).
    typealias Key = Int
    /// A key as the store's user wrote it, for the predicates of invalidations (judged outside the lock).
    typealias AnyKey = any Sendable
    typealias Value = any StoreValueBox
    typealias Change = @Sendable (Value?) -> Value?
    typealias FetchCompletion = @Sendable (Result<Snapshot, any Error>) -> Void
    typealias HitReply = @Sendable (Snapshot) -> Void
    typealias Subject = ResponseSubject
    typealias StateSubject = CurrentValueStreamSubject<StoreState<Value>?, Never>

    var entries = EntryTable()
    let levelNames: [String]
    let debouncedLevels: Set<Int>
    /// The level the store shares with other processes, if any: a change saved or removed there at once takes its
    /// place in the processes' order as the store makes it (``placesWanted``), so that a change made after it, in any
    /// process, is ordered after it, however late another caller issues its save.
    let sharedLevel: Int?
    /// The keys whose changes decided in this event save to the shared level and wait for their places, in the order
    /// they were decided: the store gives them (``place(at:forChangeOf:)``) before it unlocks.
    private(set) var placesWanted = InlineFirstArray<Key>()
    let keptValues: Int
    /// Keys that fell out of use with a value, oldest first, within `keptValues`.
    var kept = KeptValues()
    var counter = 0
    /// How many times the store was cleared: a change made for what was shown before a clear is refused after it.
    var clears = 0
    /// Who issues level operations, and a clear's `removeAll` waiting for them (see ``LevelIssuing``).
    var issuing = LevelIssuing()
    /// What the store was told of invalidations, for judging what the levels hold (see ``StaleRules``).
    var invalidations = InvalidationRecords()
    /// What the machine let go of: dropped entries and a replaced shared response. Releasing them can run a value's
    /// deinitializer (the caller's code), so the store takes them with ``takeReleased()`` and releases them after
    /// unlocking.
    var released = StoreReleased()
    /// The entry ``entry(_:)`` found last, with its key; forgotten when the entry is dropped or kept as a record.
    var recent: Entry?
    /// The entry of the key made a record last (``compact(_:)``), for the next new key or kept key back in use
    /// (``ensureEntry(_:)``, ``entry(_:)``): a key held as its record costs no allocation over all.
    var spareEntry: Entry?
    /// The key that fell out of use last with a value kept: still an entry, made a record when the next one falls out
    /// of use (see ``release(_:)``).
    var lastKept: Key?
    /// The record of the key made an entry again last, emptied, for the next key made a record: a kept key written
    /// again and again makes neither anew.
    var spareRecord: KeyRecord?
    /// Entries with state observers whose fetches began, ended or failed since the last ``takeNotices()``.
    var loadingTouched: [Entry] = []
    /// The storage of a fetch list whose last fetch ended, empty, for the next key that fetches: a first read of a
    /// key makes none of its own (see ``FetchesInFlight/giveStorage(to:)``).
    var spareFetches: [Fetch] = []
    /// The storage of a key's queue of waiting changes, emptied, for the next key whose changes wait (see
    /// ``KeyTurn/giveStorage(to:)``).
    var spareJobs: SlotQueue<Job>.Storage = []
    /// The storage of a key's level operations, emptied as they were taken to be issued, for the next key's (see
    /// ``LevelWrites/giveStorage(to:)``).
    var spareOps: [LevelOp] = []
    /// Whether the keys whose kept values the bound let go of are recorded in `evicted` (the store has events).
    let recordsEvictions: Bool
    /// Keys whose kept values the bound let go of since the last ``takeEvictions()``.
    var evicted: [Key] = []
    /// Keys whose entries were dropped, or which are no longer remembered as refreshed, since the last
    /// ``forgetDropped()``: their slots may be given back.
    var dropped: [Key] = []

    /// Whether each confirmed value, removal and clear is handed out with the effects, for the store's entities
    /// (``Effects/confirms``).
    let reportsConfirmations: Bool

    /// For a value that came from each level: the age (seconds) past which none of the levels it is saved in (that
    /// one and those before it) serves it; `nil` when one keeps values for ever. Empty when no level has an age
    /// limit.
    private let holdingAgeLimits: [Double?]

    init(
        levelNames: [String], debouncedLevels: Set<Int>, keptValues: Int, recordsEvictions: Bool = false,
        reportsConfirmations: Bool = false, levelAgeLimits: [Double?] = [], sharedLevel: Int? = nil
    ) {
        self.sharedLevel = sharedLevel
        var limits: [Double?] = []
        if levelAgeLimits.contains(where: { $0 != nil }) {
            var longest: Double? = 0
            for limit in levelAgeLimits {
                longest = limit.flatMap { limit in longest.map { max($0, limit) } }
                limits.append(longest)
            }
        }
        holdingAgeLimits = limits
        self.levelNames = levelNames
        self.debouncedLevels = debouncedLevels
        self.keptValues = max(0, keptValues)
        self.recordsEvictions = recordsEvictions
        self.reportsConfirmations = reportsConfirmations
    }

    /// The mark of a change of `key` decided now that saves to (or removes from) `targets` at once: when the shared
    /// level is among them, its place is wanted (see ``placesWanted``).
    mutating func saveMark(
        for key: Key, generation: Int, version: Int, staleSince: Int, targets: Range<Int>, debounces: Bool = false
    ) -> SaveMark {
        var mark = SaveMark(generation: generation, version: version, staleSince: staleSince)
        if let shared = sharedLevel, targets.contains(shared), !(debounces && debouncedLevels.contains(shared)) {
            mark.place = SaveMark.wanted
            placesWanted.append(key)
        }
        return mark
    }

    /// Gives the first change of `key` waiting for its place in the processes' order that place (``SaveMark/unplaced``:
    /// it takes one when its save is issued); the keys waiting are taken with ``takePlacesWanted()``.
    mutating func place(at place: UInt64, forChangeOf key: Key) {
        entry(key)?.work.writes.place(at: place)
    }

    /// The keys whose changes wait for their places, in the order they were decided; forgotten here.
    mutating func takePlacesWanted() -> InlineFirstArray<Key> {
        exchange(&placesWanted, with: InlineFirstArray())
    }

    /// Gives `operation`, the save a change applied at once handed out (``writeAtOnce(_:for:save:)``), the place it
    /// waited for: it was the last wanted.
    mutating func place(_ operation: inout LevelOp, at place: UInt64) {
        operation.place(at: place)
        placesWanted.remove(at: placesWanted.endIndex - 1)
    }

    /// The keys whose kept values the bound let go of since the last call (recorded only for a store with events).
    mutating func takeEvictions() -> [Key] {
        exchange(&evicted, with: [])
    }

    /// Whether keys were dropped or evicted since they were last taken.
    var hasDropped: Bool { !dropped.isEmpty || !evicted.isEmpty }

    /// Forgets the keys in `dropped`, once their slots were seen to. The list keeps its room when it is small: most
    /// reads end by dropping their key, and a list made anew each time would cost each of them an allocation.
    mutating func forgetDropped() {
        if dropped.count > 16 { dropped = [] } else { dropped.removeAll(keepingCapacity: true) }
    }

    /// Whether the machine holds `key`: an entry, or a refresh it remembers.
    func uses(_ key: Key) -> Bool {
        entries[key] != nil || invalidations.remembersRefresh(of: key)
    }

    /// The number of entries: keys in use, and values kept.
    var count: Int { entries.count }

    /// The last number ``next()`` gave: changes made from now on have greater ids.
    var lastNumber: Int { counter }

    mutating func next() -> Int {
        counter += 1
        return counter
    }

    /// What the machine let go of since the last call, for the caller to release after unlocking; `nil` when
    /// nothing (the common case costs one check).
    mutating func takeReleased() -> StoreReleased? {
        guard !released.isEmpty else { return nil }
        defer { released = StoreReleased() }
        return released
    }

    /// `key`'s entry, if the store holds the key: a kept key's record is made an entry again. A key's work asks for
    /// its entry several times in a row (under one lock and across the locks of one change); the last one found is
    /// remembered, since comparing a key costs less than hashing it.
    mutating func entry(_ key: Key) -> Entry? {
        if let recent, recent.key == key { return recent }
        let entry: Entry
        switch entries[key] {
        case nil: return nil
        case .inUse(let found): entry = found
        case .kept(let record): entry = resume(record)
        }
        recent = entry
        return entry
    }

    /// Makes a kept key's record an entry again (the spare entry, when there is one), in the record's place.
    private mutating func resume(_ record: KeyRecord) -> Entry {
        let entry = spareEntry.take() ?? Entry(key: record.key, generation: record.generation)
        entry.resume(record)
        entries[entry.key] = .inUse(entry)
        spareRecord = record  // its value moved out: it holds nothing
        return entry
    }

    /// `key`'s entry when it is in use, without remembering it (for the machine's queries): a kept key has none, and
    /// nothing under way.
    func peek(_ key: Key) -> Entry? {
        if let recent, recent.key == key { return recent }
        return entries.entry(at: key)
    }

    /// What the store keeps of `key`, in use or kept, without making it an entry (for the machine's queries).
    func record(_ key: Key) -> KeyRecord? {
        slot(key)?.record
    }

    /// `key`'s entry, which the event needs: a rule of the machine (`invariant`) says that something holds it. A
    /// missing entry stops the store with that rule's name, where a force unwrap would name nothing.
    mutating func entry(_ key: Key, heldBecause invariant: StaticString) -> Entry {
        guard let entry = entry(key) else { preconditionFailure("A key has no entry, yet \(invariant)") }
        return entry
    }

    /// `key`'s entry, made when it has none.
    @discardableResult
    mutating func ensureEntry(_ key: Key) -> Entry {
        if let entry = entry(key) { return entry }
        let entry: Entry
        if let spare = spareEntry.take() {
            spare.reset(key: key, generation: next())
            entry = spare
        } else {
            entry = Entry(key: key, generation: next())
        }
        entries[key] = .inUse(entry)
        recent = entry
        return entry
    }

    // MARK: Reading what is shown

    /// Whether `policy` takes `key`'s known value as it is: for a cache-first read, a value not invalidated and
    /// young enough; for a cache-only read, any; for a cache-then-network read with a maximum age, a value that needs
    /// no fetch. `snapshot` is what the key shows when the read answers with it: a value the policy takes, or any
    /// known value for a cache-then-network read (which fetches when it is not fresh). `nil` when the store holds no
    /// value for the key.
    func cached(_ key: Key, under policy: ReadPolicy, now: Date) -> (
        snapshot: Snapshot?, fresh: Bool
    )? {
        guard let slot = slot(key), let confirmed = slot.record.confirmed.value else { return nil }
        let fresh = isFresh(confirmed, of: slot.record, under: policy, now: now)
        let answers = fresh || policy.kind == .cacheThenNetwork
        return (answers ? Snapshot(slot) : nil, fresh)
    }

    /// Whether `policy` takes `key`'s known value as it is (see ``cached(_:under:now:)``).
    func isFresh(_ key: Key, under policy: ReadPolicy, now: Date) -> Bool {
        record(key).map { isFresh($0, under: policy, now: now) } ?? false
    }

    /// What a read finds first: the response for `key` when `policy` takes the store's value as it is, with no
    /// fetch, and no optimistic change is pending (then building it runs no closure, so it is built under the lock:
    /// one reference to hand out); otherwise whether the store holds the key at all.
    mutating func firstLook(_ key: Key, under policy: ReadPolicy, now: Date) -> StoreFirstLook {
        // One lookup, not ``entry(_:)``: hits spread over many keys, and remembering the last costs more. A kept
        // key's record answers as it is.
        let record: KeyRecord
        switch entries[key] {
        case nil: return .notHeld
        case .inUse(let entry):
            guard entry.work.showsConfirmed else { return .held }
            record = entry
        case .kept(let kept): record = kept
        }
        guard let confirmed = record.confirmed.value, isFresh(confirmed, of: record, under: policy, now: now) else {
            return .held
        }
        if let hit = record.confirmed.sharedHit(shown: record.version) { return .answer(hit) }
        guard let response = record.confirmed.makeHit(shown: record.version, released: &released.response) else {
            return .held
        }
        return .answer(response)
    }

    /// Whether `key`'s confirmed value was stamped after `now` (learned since a reader read its clock, or the clock
    /// was set back since it was stamped).
    func isStamped(_ key: Key, after now: Date) -> Bool {
        record(key)?.confirmed.value.map { $0.savedAt > now } ?? false
    }

    /// Whether `policy` takes `entry`'s confirmed value as it is (see ``cached(_:under:now:)``).
    func isFresh(_ record: KeyRecord, under policy: ReadPolicy, now: Date) -> Bool {
        guard let confirmed = record.confirmed.value else { return false }
        return isFresh(confirmed, of: record, under: policy, now: now)
    }

    /// Whether `policy` takes `confirmed`, `entry`'s confirmed value read already, as it is.
    private func isFresh(
        _ confirmed: StoredValue<Value>, of record: KeyRecord, under policy: ReadPolicy, now: Date
    ) -> Bool {
        switch policy.kind {
        case .networkFirst, .networkOnly: return false
        case .cacheOnly: return true
        case .cacheThenNetwork:
            guard policy.maxAgeSeconds != nil else { return false }
        case .cacheFirst: break
        }
        return !record.staleness.isStale && policy.accepts(savedAt: confirmed.savedAt, now: now)
            && (holdingAgeLimits.isEmpty || isHeldByLevels(confirmed, now: now))
    }

    /// Whether the store's levels expire values by age, so that a value's age is judged against them too (and
    /// the clock read for it).
    var levelsLimitAge: Bool { !holdingAgeLimits.isEmpty }

    /// Whether some level `value` is saved in would serve it still at `now`: it is younger than the longest age
    /// limit among them (levels without one keep it for ever).
    func isHeldByLevels(_ value: StoredValue<Value>, now: Date) -> Bool {
        guard levelsLimitAge else { return true }
        var level = holdingAgeLimits.count - 1  // fetched or written: saved in every level
        if case .cache(let name) = value.origin, let index = levelNames.firstIndex(of: name) { level = index }
        guard let limit = holdingAgeLimits[level] else { return true }
        return value.savedAt <= now && now.timeIntervalSince(value.savedAt) < limit
    }

    /// What `key` shows now, when it shows anything (a known value or pending changes).
    func shown(_ key: Key) -> Snapshot? {
        guard let slot = slot(key), shows(slot) else { return nil }
        return Snapshot(slot)
    }

    /// Whether `key` shows anything now (a known value or pending changes).
    func showsSomething(_ key: Key) -> Bool {
        slot(key).map(shows) ?? false
    }

    /// Whether the key in `slot` shows anything: a known value, or pending changes.
    private func shows(_ slot: EntryTable.Slot) -> Bool {
        slot.entry?.showsSomething ?? (slot.record.confirmed.value != nil)
    }

    /// What the store holds of `key`, in use or kept (for the machine's queries).
    func slot(_ key: Key) -> EntryTable.Slot? {
        if let recent, recent.key == key { return .inUse(recent) }
        return entries[key]
    }

    /// `key`'s shown value with `error` attached, as a new version; `nil` when it shows nothing (the read fails).
    mutating func attach(_ error: any Error, to key: Key) -> Snapshot? {
        guard let entry = entry(key), entry.showsSomething else { return nil }
        entry.version = next()
        let snapshot = Snapshot(entry: entry, version: entry.version, error: error)
        if entry.observed?.states != nil { entry.shown.showLoading(snapshot.isLoading) }
        return snapshot
    }
}

/// What a read finds when it first looks at its key (see ``StoreMachine/firstLook(_:under:now:)``).
@usableFromInline
enum StoreFirstLook {
    /// The store's value answers as it is.
    case answer(StoreResponse<any StoreValueBox>)
    /// The store holds the key, but its value does not answer by itself.
    case held
    /// The store does not hold the key.
    case notHeld
}
