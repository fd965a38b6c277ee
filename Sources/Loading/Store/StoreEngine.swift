#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a store's lock guards, compiled once: its machine and its keys' slots. The store's generic face hashes a
/// key, says how to recognize it and how to keep it, and runs the machine's events through here; what the machine
/// lets go of is released after unlocking (a value's deinitializer is the caller's code), and the face is told when
/// the machine has notices for state observers.
@usableFromInline
final class StoreEngine: Sendable {
    private struct State: Sendable {
        var machine: StoreMachine
        var keys = StoreKeys()

        /// Gives back the slots of the keys the machine let go of during the event, after noting the evicted ones;
        /// returns those keys, for the caller to let go of after unlocking.
        mutating func settle() -> InlineFirstArray<StoreKeys.Object> {
            guard machine.hasDropped else { return InlineFirstArray() }
            for slot in machine.takeEvictions() { keys.noteEvicted(slot) }
            var released = InlineFirstArray<StoreKeys.Object>()
            for slot in machine.takeDropped() where !machine.uses(slot) {
                if let key = keys.release(slot) { released.append(key) }
            }
            return released
        }
    }

    private let state: Locked<State>

    init(machine: StoreMachine) {
        state = Locked(State(machine: machine))
    }

    /// Runs `body` on the machine under the lock; then releases what it let go of and, when the machine has notices
    /// for state observers, calls `notices`.
    @usableFromInline
    func run<Result>(noticing notices: () -> Void, _ body: (inout StoreMachine) -> Result) -> Result {
        withState(noticing: notices) { body(&$0.machine) }
    }

    /// ``run(noticing:_:)`` for an event of one key, which `body` names by its slot: the key with `hash` that
    /// `isKey` recognizes, else a new slot, kept for the key (`make` makes what is kept) when the event leaves the
    /// machine using it.
    @usableFromInline
    func run<Result>(
        hash: Int, where isKey: (StoreKeys.Object) -> Bool, making make: () -> StoreKeys.Object,
        noticing notices: () -> Void, _ body: (inout StoreMachine, Int) -> Result
    ) -> Result {
        withState(noticing: notices) { state in
            let found = state.keys.slot(hash: hash, where: isKey)
            let slot = found ?? state.keys.takeSlot()
            let result = body(&state.machine, slot)
            if found == nil {
                if state.machine.uses(slot) {
                    state.keys.keep(make(), slot, hash: hash)
                } else {
                    state.keys.giveBack(slot)
                }
            }
            return result
        }
    }

    /// What a read of the key with `hash` that `isKey` recognizes finds first (see
    /// ``StoreMachine/firstLook(_:under:now:)``): the hit path, not generic, so compiled here once and whole. A key with
    /// no slot is not held.
    @usableFromInline
    func firstLook(
        hash: Int, where isKey: (StoreKeys.Object) -> Bool, under policy: ReadPolicy, now: Date,
        noticing notices: () -> Void
    ) -> StoreMachine.FirstLook {
        withState(noticing: notices) { state in
            guard let slot = state.keys.slot(hash: hash, where: isKey) else { return .notHeld }
            return state.machine.firstLook(slot, under: policy, now: now)
        }
    }

    /// ``run(noticing:_:)`` with the keys' slots too: for an event that names keys or answers with them.
    @usableFromInline
    func runWithKeys<Result>(
        noticing notices: () -> Void, _ body: (inout StoreMachine, inout StoreKeys) -> Result
    ) -> Result {
        withState(noticing: notices) { body(&$0.machine, &$0.keys) }
    }

    /// Runs `body` under the lock and settles the event: the slots of the keys the machine let go of are given
    /// back, and what it let go of, those keys too, is released after unlocking.
    private func withState<Result>(noticing notices: () -> Void, _ body: (inout State) -> Result) -> Result {
        var released: StoreReleased?
        var keys = InlineFirstArray<StoreKeys.Object>()
        let result = state.withLock { state in
            let result = body(&state)
            keys = state.settle()
            released = state.machine.takeReleased()
            return result
        }
        _ = consume keys
        if let released { finish(released, noticing: notices) }
        return result
    }

    /// Releases what the machine let go of (here, unlocked) and tells of its notices.
    private func finish(_ released: consuming StoreReleased, noticing notices: () -> Void) {
        let hasNotices = released.hasNotices
        _ = consume released
        if hasNotices { notices() }
    }

    /// The number of keys with a slot, and of slots ever made (for tests).
    var slotCounts: (keys: Int, slots: Int) {
        state.withLock { ($0.keys.count, $0.keys.capacity) }
    }
}
