#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What the store knows of one key in use. A reference, so that changing a field costs neither a copy of the
    /// entry nor a second lookup of its key; it is reached only through the machine, which only the store's lock
    /// reaches (that lock is what makes it safe to send). Its fields keep the run-time exclusivity checks of a class
    /// (about 80 instructions each look; some 30 looks and 2,500 instructions of a first read, Benchmarks scenario
    /// 17), which the entry as a value in the slot table would make static; what holds it in use is one field
    /// (``KeyWork``) for that reason.
    final class Entry: @unchecked Sendable {
        /// The key's truth, when the store knows it (when not, the levels hold it).
        var confirmed = ConfirmedValue()
        /// What is under way for the key, which holds the entry in use.
        var work = KeyWork()
        /// The version of the last response published for the key.
        var version = 0
        var generation: Int
        var observers = 0
        var levelReads = 0
        /// Changes confirmed while fetches were in flight, to apply again to what they bring.
        var log = ChangeLog()
        /// Set while the entry counts among the kept values.
        var keptStamp: Int?
        /// The subjects the key's observers subscribe to, while it has some (replaced, not changed: see
        /// ``StoreMachine/Observed``).
        var observed: Observed?
        /// How many of `observers` observe the key's states (``Store/states(for:)``); the others, its values.
        var stateObservers = 0
        /// When the key's observation last began or ended, in the store's order: the key observed most recently
        /// is refreshed first within a budget (``Store/revalidate(within:clock:)``).
        var observedAt = 0
        /// What the key's state observers were shown last (loading, the latest failure).
        var shown = ShownStates()
        /// Whether the value is stale, and the refetch owed to the observers.
        var staleness = Staleness()
        /// The entry's key (for ``StoreMachine/entry(_:)``, which remembers the entry found last).
        var key: Key

        init(key: Key, generation: Int) {
            self.key = key
            self.generation = generation
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

    /// A key that fell out of use with a value, and the stamp it was kept with.
    struct KeptRecord: Sendable {
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
            let value = entry.confirmed.value
            confirmed = StoreResponse(
                box: value?.value, origin: value?.origin ?? .local, savedAtSeconds: value?.savedAtSeconds,
                hasPendingChanges: false, error: error, version: version)
            pending = entry.work.pending.isEmpty ? nil : ShownChanges(entry: entry)
            observed = entry.observed
            isStale = entry.staleness.isStale
            isLoading = entry.observed?.states != nil && entry.isLoading
            self.isNotice = isNotice
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
