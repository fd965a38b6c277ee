#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
