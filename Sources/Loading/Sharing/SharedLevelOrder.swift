#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Keeps the change made last (in the order every process over the journal agrees on) in a level that processes
/// share, whichever save lands last.
///
/// Each save or removal of a key this process makes in the shared level takes its place in the processes' order when
/// the store makes the change (under its lock, so that a change made after it, by any caller, takes a later place even
/// when its save is issued first), and is recorded in the journal with it once it landed.
/// This process's latest change of a key is its claim on the key. When another process's record of the key comes
/// with an earlier place, the claim is newer: this process keeps showing its value, and since the earlier save may
/// have landed after its own, saves it again (with its own place, once its save landed) — the other process learns
/// that record, sees a later place than its own, and shows what the level holds. This process reads the key again
/// once its re-save landed: a read of the level may have found the earlier change in between. A record with a later
/// place ends the claim: the store reads the level, as it did before.
///
/// Every operation a key's re-save overtakes waits behind it (the level then gets them in the order they were issued,
/// as a shared level must answer). The claims are bounded: past ``claimLimit``, the oldest landed ones are let go of
/// (a save of another process landing that late may then hold the key until its next change).
final class SharedLevelOrder: Sendable {
    /// This process's latest change of a key to the shared level.
    private struct Claim {
        let order: UInt64
        let key: AnyStoreKey
        /// The value saved, or `nil` for a removal.
        let value: (any StoreValueBox)?
        let savedAt: Double
        /// Whether the level holds it (its save, or its last re-save, landed).
        var landed = false
        /// Whether a change with an earlier place was learned while its save was on its way: it is saved again once
        /// it lands.
        var overtaken = false
        /// Whether it outlived another process's clear: the store reads it again once it landed (the store forgot
        /// it with the clear).
        var outlivedClear = false
    }

    private struct State {
        var claims: [Data: Claim] = [:]
        /// The place of the latest emptying of the level this process made or learned: a change made before it is
        /// the old user's, and the level keeps none (see ``learnedChange(of:_:at:removed:)``).
        var clearedAt: UInt64 = 0
        /// The place of the latest emptying another process made, as learned: a save of this process made before it
        /// may land after it (this process's own emptying is issued after its saves, and lands after them).
        var learnedClearAt: UInt64 = 0
        /// Keys whose re-save is being issued, with the operations issued meanwhile, waiting behind it.
        var waiting: [Data: [@Sendable () -> Void]] = [:]
    }

    /// The saves the store heard landed whose records are not appended yet (numbered as they landed), and what waits
    /// for them to be: a flush, so that a process ended once it completed has told the other processes too.
    private struct Recording {
        var landed: UInt64 = 0
        var unrecorded: Set<UInt64> = []
        var waiting: [(upTo: UInt64, body: @Sendable () -> Void)] = []

        mutating func begin() -> UInt64 {
            landed += 1
            unrecorded.insert(landed)
            return landed
        }

        /// Returns what waited for `landing` last, to run after unlocking.
        mutating func end(_ landing: UInt64) -> [@Sendable () -> Void] {
            unrecorded.remove(landing)
            guard !waiting.isEmpty else { return [] }
            let oldest = unrecorded.min() ?? .max
            var done: [@Sendable () -> Void] = []
            waiting.removeAll { waiter in
                guard waiter.upTo < oldest else { return false }
                done.append(waiter.body)
                return true
            }
            return done
        }
    }

    /// How many claims are kept (the oldest landed ones go past twice as many).
    static let claimLimit = 4_096

    let journal: ChangeJournal
    /// The shared level, as the store issued to it before it was ordered.
    private let level: BoxedLevel
    private let encodeKey: @Sendable (AnyStoreKey) -> Data?
    private let onFailure: @Sendable (any Error) -> Void
    private let state = Locked(State())
    private let recording = Locked(Recording())
    /// What reads a key again once a re-save, or a change that outlived another process's clear, landed.
    private let relearn = Locked<(@Sendable (AnyStoreKey) -> Void)?>(nil)
    /// The clears learned from other processes that the store is making, the latest one's place, and the keys other
    /// processes changed after it meanwhile: a read made during a clear finds nothing, so they are read again once
    /// the clears ended.
    private let clearing = Locked<(clears: Int, after: UInt64, learned: [AnyStoreKey])>((0, 0, []))

    /// Orders the changes of `level` through `journal`, a key as `encodeKey` encodes it.
    init(
        _ level: BoxedLevel, journal: ChangeJournal, encodeKey: @escaping @Sendable (AnyStoreKey) -> Data?,
        onFailure: @escaping @Sendable (any Error) -> Void
    ) {
        self.level = level
        self.journal = journal
        self.encodeKey = encodeKey
        self.onFailure = onFailure
    }

    /// The level, each save, removal and emptying of it that succeeds recorded in the journal with its place in the
    /// processes' order (a key `encodeKey` cannot encode is not recorded, nor ordered).
    var orderedLevel: BoxedLevel {
        let level = level
        return level.wrapped(
            read: { [self] key, completion in
                // A read behind a re-save cannot be stopped early; it still completes.
                guard waits(key, { _ = level.read(key, completion) }) else { return level.read(key, completion) }
                return nil
            },
            save: { [self] box, savedAt, key, completion in
                change(key, to: box, savedAt: savedAt, completion: completion)
            },
            removeValue: { [self] key, completion in
                change(key, to: nil, savedAt: 0, completion: completion)
            },
            removeAll: { [self] completion in removeAll(at: nil, completion: completion) })
    }

    /// Empties the level, recorded at `place` in the processes' order, taken when the store made its clear (a place
    /// is taken now when it has none): what this process claimed ends.
    func removeAll(at place: UInt64?, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let order = place ?? takeOrder()
        // The claims' values are released after unlocking (a value's deinitializer is the app's code).
        let dropped = state.withLock { state in
            state.clearedAt = max(state.clearedAt, order ?? 0)
            return exchange(&state.claims, with: [:])
        }
        withExtendedLifetime(dropped) {}
        level.removeAll { [self] result in
            if case .success = result, let order { record(.cleared, order: order) }
            completion(result)
        }
    }

    /// Runs `body` once the saves the store heard landed so far are recorded in the journal (at once when they are).
    func whenRecorded(_ body: @escaping @Sendable () -> Void) {
        let waits = recording.withLock { recording in
            guard let newest = recording.unrecorded.max() else { return false }
            recording.waiting.append((newest, body))
            return true
        }
        if !waits { body() }
    }

    /// How many keys this process's latest changes are remembered for (bounded: see ``claimLimit``).
    var claimCount: Int { state.withLock { $0.claims.count } }

    /// Reads a key again, in the store, once its re-save, or its change that outlived another process's clear, landed.
    func onRelearn(_ body: @escaping @Sendable (AnyStoreKey) -> Void) {
        relearn.withLock { $0 = body }
    }

    /// The store begins the clear another process made at `order` (`nil`: a record that has no place).
    func clearBegins(at order: UInt64?) {
        clearing.withLock { $0 = ($0.clears + 1, max($0.after, order ?? .max), $0.learned) }
    }

    /// Another process changed `object`'s key at `order`: noted when it was made after a clear under way (the next
    /// user's), to be read again once the clear ended.
    func noteChangeLearned(of object: AnyStoreKey, at order: UInt64?) {
        clearing.withLock { clearing in
            guard clearing.clears > 0, let order, order > clearing.after else { return }
            clearing.learned.append(object)
        }
    }

    /// The store's clear ended: the keys other processes changed after it while it was under way, to read again.
    func clearEnded() -> [AnyStoreKey] {
        clearing.withLock { clearing in
            clearing.clears -= 1
            guard clearing.clears == 0 else { return [] }
            defer { (clearing.after, clearing.learned) = (0, []) }
            return clearing.learned
        }
    }

    // MARK: What this process changes

    /// A place in the processes' order for a change the store makes now, under its lock (no app code runs here);
    /// ``StoreMachine/SaveMark/unplaced`` when the journal cannot give one: the change's save then takes one as it is
    /// issued, and reports the failure.
    func takePlace() -> UInt64 {
        (try? journal.takeOrder()) ?? StoreMachine.SaveMark.unplaced
    }

    /// Issues a save (or a removal, `box` being `nil`) of `key`, claiming it at `place`, taken when the store made
    /// the change (``takePlace()``); a place is taken now when it has none.
    func change(
        _ key: AnyStoreKey, to box: (any StoreValueBox)?, savedAt: Double, at place: UInt64? = nil,
        completion: @escaping BoxedLevel.Completion
    ) {
        guard let encoded = encodeKey(key), let order = place ?? takeOrder() else {
            return issue(box, savedAt: savedAt, of: key, completion: completion)
        }
        let claim = Claim(order: order, key: key, value: box, savedAt: savedAt)
        let send: @Sendable () -> Void = { [self] in
            issue(box, savedAt: savedAt, of: key) { [self] result in
                // Recorded after the store heard of it: a mutation queue that confirmed the value has let go of its
                // stored mutation by then, so another process never learns the value while that mutation is kept.
                let landing = recording.withLock { $0.begin() }
                completion(result)
                landed(claim, of: encoded, result: result)
                for body in recording.withLock({ $0.end(landing) }) { body() }
            }
        }
        let (waits, replaced) = state.withLock { state in
            let replaced = state.claims.updateValue(claim, forKey: encoded)
            return (state.waiting[encoded]?.append(send) != nil, replaced)
        }
        withExtendedLifetime(replaced) {}
        if !waits { send() }
    }

    /// Whether `operation` of `key` waits behind the key's re-save being issued (it is run once that is issued);
    /// `false`: the caller runs it now.
    private func waits(_ key: AnyStoreKey, _ operation: @escaping @Sendable () -> Void) -> Bool {
        // Most reads find no re-save at all: the key is encoded (outside the lock: the app's code) only when one is
        // being issued.
        guard !state.withLock({ $0.waiting.isEmpty }), let encoded = encodeKey(key) else { return false }
        return state.withLock { $0.waiting[encoded]?.append(operation) != nil }
    }

    private func issue(
        _ box: (any StoreValueBox)?, savedAt: Double, of key: AnyStoreKey, completion: @escaping BoxedLevel.Completion
    ) {
        if let box { level.save(box, savedAt, key, completion) } else { level.removeValue(key, completion) }
    }

    /// A save (or a re-save, `resaved`) of `claim` landed: it is recorded, and saved again when an earlier change was
    /// learned meanwhile (it may have landed after this one). Once a re-save landed, the store reads the key again: an
    /// earlier change that landed after this process's may have been read from the level meanwhile, and nothing else
    /// would tell the store that its own change is what the level holds again.
    private func landed(_ claim: Claim, of encoded: Data, result: Result<Void, any Error>, resaved: Bool = false) {
        guard case .success = result else {
            // The level does not hold it: nothing to keep there.
            let dropped = state.withLock { state in
                state.claims[encoded]?.order == claim.order ? state.claims.removeValue(forKey: encoded) : nil
            }
            return withExtendedLifetime(dropped) {}
        }
        record(claim.value == nil ? .removed(encoded) : .saved(encoded), order: claim.order)
        if claim.value != nil,
            let clearedAt = state.withLock({ $0.learnedClearAt > claim.order ? $0.learnedClearAt : nil })
        {
            // Another process's emptying of the level made after this change may have landed before it: the old
            // user's value goes.
            return removeAgain(claim.key, encoded, at: clearedAt, relearning: true)
        }
        var dropped: [Claim] = []
        let (saveAgain, relearns) = state.withLock { state -> (Bool, Bool) in
            guard var current = state.claims[encoded], current.order == claim.order else { return (false, false) }
            current.landed = !current.overtaken
            current.overtaken = false
            let relearns = current.landed && (exchange(&current.outlivedClear, with: false) || resaved)
            state.claims[encoded] = current
            if current.landed { dropped = trimClaims(&state) }
            return (!current.landed, relearns)
        }
        withExtendedLifetime(dropped) {}
        if saveAgain { saveAgainUnlessNewer(encoded, order: claim.order) }
        if relearns, let relearn = relearn.withLock({ $0 }) { relearn(claim.key) }
    }

    /// Saves `encoded`'s claim again, when it still is the one at `order`: issued before any operation of the key
    /// that comes meanwhile (or, when another re-save of the key is being issued, right after it).
    private func saveAgainUnlessNewer(_ encoded: Data, order: UInt64) {
        let saveAgain: @Sendable () -> Void = { [self] in
            guard let claim = state.withLock({ $0.claims[encoded] }), claim.order == order else { return }
            issue(claim.value, savedAt: claim.savedAt, of: claim.key) { [self] result in
                landed(claim, of: encoded, result: result, resaved: true)
            }
        }
        let issuing = state.withLock { state in
            guard state.waiting[encoded] == nil else {
                state.waiting[encoded]?.append(saveAgain)
                return false
            }
            state.waiting[encoded] = []
            return true
        }
        guard issuing else { return }
        saveAgain()
        // What waited behind the re-save, in order, and what comes while those are issued.
        while let operations = state.withLock({ state -> [@Sendable () -> Void]? in
            guard let operations = state.waiting[encoded], !operations.isEmpty else {
                state.waiting[encoded] = nil
                return nil
            }
            state.waiting[encoded] = []
            return operations
        }) {
            for operation in operations { operation() }
        }
    }

    private func takeOrder() -> UInt64? {
        do {
            return try journal.takeOrder()
        } catch {
            onFailure(error)
            return nil
        }
    }

    private func record(_ change: ChangeJournal.Change, order: UInt64) {
        do { try journal.append(change, order: order) } catch { onFailure(error) }
    }

    /// Lets go of the oldest landed claims once there are twice as many as kept; returns them, for the caller to
    /// release after unlocking.
    private func trimClaims(_ state: inout State) -> [Claim] {
        guard state.claims.count > 2 * Self.claimLimit else { return [] }
        let landed = state.claims.filter { $0.value.landed && state.waiting[$0.key] == nil }
        return landed.sorted(by: { $0.value.order < $1.value.order }).prefix(Self.claimLimit).compactMap {
            state.claims.removeValue(forKey: $0.key)
        }
    }

    // MARK: What other processes change

    /// Another process changed `object`'s key (`encoded`) at `order` (`nil`: a record that has no place): whether
    /// that change is the newer one, which the store then reads from the level. When this process's claim is newer,
    /// it is kept, and saved again (now, or once its save landed). A value saved before an emptying of the level
    /// this process made or learned is the old user's, which may have landed after the emptying: it is removed
    /// again, at the emptying's place, before the store reads the key.
    func learnedChange(of object: AnyStoreKey, _ encoded: Data, at order: UInt64?, removed: Bool) -> Bool {
        var dropped: Claim?
        let kept = state.withLock { state -> (order: UInt64, savesAgain: Bool)? in
            guard let order, var claim = state.claims[encoded], claim.order > order else {
                dropped = state.claims.removeValue(forKey: encoded)
                return nil
            }
            defer { state.claims[encoded] = claim }
            return (claim.order, overtake(&claim))
        }
        withExtendedLifetime(dropped) {}
        guard let kept else {
            guard !removed, let order, let clearedAt = state.withLock({ $0.clearedAt > order ? $0.clearedAt : nil })
            else { return true }
            removeAgain(object, encoded, at: clearedAt, relearning: false)
            return true
        }
        if kept.savesAgain { saveAgainUnlessNewer(encoded, order: kept.order) }
        return false
    }

    /// Removes `key` from the level again, claimed at `order`, the place of an emptying that a value saved before it
    /// may have outlived; a process whose change of the key is newer saves its own again on learning the removal.
    /// Once it landed the store reads the key again when `relearning` (it may have read the old value meanwhile).
    private func removeAgain(_ key: AnyStoreKey, _ encoded: Data, at order: UInt64, relearning: Bool) {
        let removal = Claim(order: order, key: key, value: nil, savedAt: 0)
        let send: @Sendable () -> Void = { [self] in
            issue(nil, savedAt: 0, of: key) { [self] result in
                landed(removal, of: encoded, result: result)
                if relearning, let relearn = relearn.withLock({ $0 }) { relearn(key) }
            }
        }
        let (sends, replaced) = state.withLock { state -> (Bool, Claim?) in
            // A claim of the key made since the emptying is newer: it stays, and nothing is removed.
            if let newer = state.claims[encoded], newer.order > order { return (false, nil) }
            let replaced = state.claims.updateValue(removal, forKey: encoded)
            // Issued behind the key's re-save when one is being issued.
            return (state.waiting[encoded]?.append(send) == nil, replaced)
        }
        withExtendedLifetime(replaced) {}
        if sends { send() }
    }

    /// Another process emptied the level at `order`: the claims made before it end; those made after it are saved
    /// again (the emptying may have landed after them), and read again by the store once they landed. Returns their
    /// keys, for the store to read again once its own clear ended too.
    func learnedClear(at order: UInt64?) -> [AnyStoreKey] {
        var dropped: [Claim] = []
        let (saveAgain, outliving) = state.withLock { state -> ([(Data, UInt64)], [AnyStoreKey]) in
            guard let order else {
                dropped = Array(exchange(&state.claims, with: [:]).values)
                return ([], [])
            }
            state.clearedAt = max(state.clearedAt, order)
            state.learnedClearAt = max(state.learnedClearAt, order)
            var saveAgain: [(Data, UInt64)] = []
            var outliving: [AnyStoreKey] = []
            for (encoded, var claim) in state.claims {
                if claim.order < order {
                    dropped += state.claims.removeValue(forKey: encoded).map { [$0] } ?? []
                } else {
                    claim.outlivedClear = true
                    outliving.append(claim.key)
                    if overtake(&claim) { saveAgain.append((encoded, claim.order)) }
                    state.claims[encoded] = claim
                }
            }
            return (saveAgain, outliving)
        }
        withExtendedLifetime(dropped) {}
        for (encoded, order) in saveAgain { saveAgainUnlessNewer(encoded, order: order) }
        return outliving
    }

    /// This process fell behind the journal and lost records (anything may have changed): every claim is saved
    /// again, as an earlier change may have landed after it (a process whose change is later saves its own again in
    /// turn, on learning this one). Returns whether `object`'s key is claimed, for the store to read the others.
    func learnedMissedChanges() -> @Sendable (AnyStoreKey) -> Bool {
        let claimed = state.withLock { state -> [(Data, UInt64)] in
            var saveAgain: [(Data, UInt64)] = []
            for (encoded, var claim) in state.claims {
                if overtake(&claim) { saveAgain.append((encoded, claim.order)) }
                state.claims[encoded] = claim
            }
            return saveAgain
        }
        for (encoded, order) in claimed { saveAgainUnlessNewer(encoded, order: order) }
        let keys = Set(claimed.map(\.0))
        return { [encodeKey] object in encodeKey(object).map { keys.contains($0) } ?? false }
    }

    /// An earlier change reached the level after `claim` was issued: returns whether it is saved again now (it
    /// landed); otherwise it is once it lands.
    private func overtake(_ claim: inout Claim) -> Bool {
        guard claim.landed else {
            claim.overtaken = true
            return false
        }
        claim.landed = false
        return true
    }
}
