#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The store's core, compiled once: its lock, its machine and its keys' slots, and the work that follows the
/// machine's decisions (publishing, the levels' writes, a key's queued changes, fetches). The store's generic face
/// hashes a key, says how to recognize it and how to keep it, and runs the machine's events through here; what the
/// machine lets go of is released after unlocking (a value's deinitializer is the caller's code). The core knows
/// values as boxes and keys as the objects the face made of them; closures made where the types are known unbox them
/// (a level's ``BoxedLevel``, the upstream load), and so does the work the face made for events, fetch contexts and
/// coordination (``StoreHooks``).
@usableFromInline
final class StoreEngine: Sendable {
    private struct State: Sendable {
        var machine: StoreMachine
        var keys = StoreKeys()

        /// Gives back the slots of the keys the machine let go of during the event, after noting the evicted ones;
        /// returns those keys, for the caller to let go of after unlocking.
        mutating func settle() -> InlineFirstArray<AnyStoreKey> {
            guard machine.hasDropped else { return InlineFirstArray() }
            for slot in machine.takeEvictions() { keys.noteEvicted(slot) }
            var released = InlineFirstArray<AnyStoreKey>()
            for slot in machine.dropped where !machine.uses(slot) {
                if let key = keys.release(slot) { released.append(key) }
            }
            machine.forgetDropped()
            return released
        }

        /// Runs `body` for the key with `hash` that `isKey` recognizes, else for a new slot, kept for the key
        /// (`make` makes what is kept) when the event leaves the machine using it; `slot` is set to the key's slot.
        /// (A generic tuple is not returned: code that is not specialized would look up its type at run time.)
        mutating func run<Result>(
            hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey,
            slot: inout Int, _ body: (inout StoreMachine, Int) -> Result
        ) -> Result {
            let found = keys.slot(hash: hash, where: isKey)
            slot = found ?? keys.takeSlot()
            let result = body(&machine, slot)
            if found == nil {
                if machine.uses(slot) {
                    keys.keep(make(), slot, hash: hash)
                } else {
                    keys.giveBack(slot)
                }
            }
            return result
        }
    }

    private let state: Locked<State>
    /// The levels, fastest first, as the core writes them.
    let levels: [BoxedLevel]
    /// Tells `onWriteFailure` of a failed level operation.
    let reportFailure: StoreMachine.SaveTicket.Report
    /// The store's clock.
    let now: @Sendable () -> Date
    /// The maximum age of the values cache-first and cache-then-network reads take as fresh, unless they say.
    let maxAgeSeconds: Double?
    /// Whether a level expires values by age: a read then judges the store's values by the clock, whatever its
    /// policy's maximum age.
    let levelsLimitAge: Bool
    /// How the core loads a key from upstream.
    let upstream: Upstream
    /// What fetches do while the network cannot be reached.
    let network: NetworkMode
    /// The work that needs the store's types beyond a load (events, a fetch context, a coordination), when the
    /// store has any: its upstream loads go through it.
    let hooks: (any StoreHooks)?
    /// The index of the level the store shares with other processes under a coordination of its fetches, if any:
    /// what a read finds there is noted for the fetch it starts.
    let coordinatedLevel: Int?
    /// Told each change of a key's confirmed value and each clear, after unlocking, when the store shares entities.
    let confirmations: (any ConfirmationObserver)?
    /// What orders the changes of the level the store shares with other processes (the machine's
    /// ``StoreMachine/sharedLevel``), if it shares one.
    let sharedOrder: SharedLevelOrder?
    /// The index of that level.
    let sharedLevel: Int?

    /// Loads a call's key from upstream, answering the call with the value boxed: made by the store's face where
    /// the key's and value's types are known.
    typealias Upstream = @Sendable (UpstreamCall) -> any CancellationToken

    init(
        machine: StoreMachine, levels: [BoxedLevel], reportFailure: StoreMachine.SaveTicket.Report,
        maxAgeSeconds: Double?, now: @escaping @Sendable () -> Date, upstream: @escaping Upstream,
        network: NetworkMode, hooks: (any StoreHooks)?, confirmations: (any ConfirmationObserver)? = nil,
        sharedOrder: SharedLevelOrder? = nil
    ) {
        precondition(
            (machine.sharedLevel == nil) == (sharedOrder == nil),
            "A store shares a level with other processes, and orders its changes, or neither")
        self.sharedOrder = sharedOrder
        sharedLevel = machine.sharedLevel
        levelsLimitAge = machine.levelsLimitAge
        state = Locked(State(machine: machine))
        self.levels = levels
        self.reportFailure = reportFailure
        self.maxAgeSeconds = maxAgeSeconds
        self.now = now
        self.upstream = upstream
        self.network = network
        self.hooks = hooks
        coordinatedLevel = hooks?.coordinatedLevel
        self.confirmations = confirmations
    }

    /// Runs `body` on the machine under the lock; then releases what it let go of and, when the machine has notices
    /// for state observers, publishes them.
    func run<Result>(_ body: (inout StoreMachine) -> Result) -> Result {
        withState { body(&$0.machine) }
    }

    /// ``run(_:)`` for an event of one key, which `body` names by its slot: the key with `hash` that
    /// `isKey` recognizes, else a new slot, kept for the key (`make` makes what is kept) when the event leaves the
    /// machine using it.
    func run<Result>(
        hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey,
        _ body: (inout StoreMachine, Int) -> Result
    ) -> Result {
        withState { state in
            var slot = 0
            return state.run(hash: hash, where: isKey, making: make, slot: &slot, body)
        }
    }

    /// ``run(hash:where:making:_:)``, setting `kept` to the key as the core holds it when the event leaves the
    /// machine using the key: what the effects of the key's event name it by (``perform(_:for:issuingFirst:)``).
    func run<Result>(
        hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey,
        keeping kept: inout StoreKeyRef?, _ body: (inout StoreMachine, Int) -> Result
    ) -> Result {
        withState { state in
            var slot = 0
            let result = state.run(hash: hash, where: isKey, making: make, slot: &slot, body)
            if state.machine.uses(slot) { kept = StoreKeyRef(object: state.keys.object(at: slot), hash: hash) }
            return result
        }
    }

    /// ``run(hash:where:making:_:)`` for the key `key` stands for: the same object, or an equal key made since
    /// (kept as `key` when the key has no slot).
    func run<Result>(_ key: StoreKeyRef, _ body: (inout StoreMachine, Int) -> Result) -> Result {
        run(hash: key.hash, where: { $0 === key.object || key.isSameKey(as: $0) }, making: { key.object }, body)
    }

    /// ``run(_:_:)``, setting `kept` to the key as the core holds it when the event leaves the machine using it.
    func run<Result>(
        _ key: StoreKeyRef, keeping kept: inout StoreKeyRef?, _ body: (inout StoreMachine, Int) -> Result
    ) -> Result {
        run(
            hash: key.hash, where: { $0 === key.object || key.isSameKey(as: $0) }, making: { key.object },
            keeping: &kept, body)
    }

    /// What a read of the key with `hash` that `isKey` recognizes finds first (see
    /// ``StoreMachine/firstLook(_:under:now:)``): the hit path, not generic, so compiled here once and whole. `policy`
    /// is the read's, before the store's maximum age applies to it; the clock is read only when the policy judges
    /// age, into `began` (else `distantPast`). A key with no slot is not held; `held` is set to the object of a key
    /// that is. A value that answers is told to the store's events (in the caller's task).
    @usableFromInline
    func firstLook(
        hash: Int, where isKey: (AnyStoreKey) -> Bool, under policy: ReadPolicy, began: inout Date,
        held: inout AnyStoreKey?
    ) -> StoreFirstLook {
        let policy = defaulted(policy)
        let now = policy.maxAgeSeconds == nil && !levelsLimitAge ? Date.distantPast : now()
        began = now
        var answered: AnyStoreKey?
        let look = withState { state -> StoreFirstLook in
            guard let slot = state.keys.slot(hash: hash, where: isKey) else { return .notHeld }
            let look = state.machine.firstLook(slot, under: policy, now: now)
            switch look {
            case .held: held = state.keys.object(at: slot)
            case .answer where hooks != nil: answered = state.keys.object(at: slot)
            case .answer, .notHeld: break
            }
            return look
        }
        if let answered, let hooks { hooks.tellHeldValueRead(StoreKeyRef(object: answered, hash: hash)) }
        return look
    }

    /// `policy` with the store's maximum age when it has none and judges age.
    func defaulted(_ policy: ReadPolicy) -> ReadPolicy {
        policy.defaulting(maxAgeSeconds: maxAgeSeconds)
    }

    /// ``run(_:)`` with the keys' slots too: for an event that names keys or answers with them.
    func runWithKeys<Result>(_ body: (inout StoreMachine, inout StoreKeys) -> Result) -> Result {
        withState { body(&$0.machine, &$0.keys) }
    }

    /// Gives the changes the event decided for the shared level their places in the processes' order, before
    /// unlocking: a change made after one of them, by any caller, here or in another process, then takes a later
    /// place, whichever of their saves is issued first. (The journal's counter is a file, read and written under a file
    /// lock: work under the store's lock, done only by a store that shares a level, for its changes.)
    private func place(_ machine: inout StoreMachine) {
        for key in machine.takePlacesWanted() {
            machine.place(at: sharedOrder?.takePlace() ?? StoreMachine.SaveMark.unplaced, forChangeOf: key)
        }
    }

    /// Forgets everything in the first `levels` levels, or every level (see
    /// ``StoreMachine/clear(levels:keepingChangesAfter:place:completion:)``), and performs the effects. A clear that
    /// empties the shared level is a change made now: it takes its place in the processes' order under the lock, as
    /// a save does (its `removeAll` may be issued later, behind what was decided before).
    func clear(
        levels: Int? = nil, keepingChangesAfter logout: UInt64? = nil, completion: @escaping @Sendable () -> Void
    ) {
        let emptiesSharedLevel = sharedLevel.map { (levels ?? self.levels.count) > $0 } ?? false
        let effects = run { machine in
            let place = emptiesSharedLevel ? sharedOrder?.takePlace() : nil
            return machine.clear(levels: levels, keepingChangesAfter: logout, place: place, completion: completion)
        }
        perform(effects, for: nil)
    }

    /// Gives `save`, handed out by a change applied at once, its place in the processes' order when it waits for one
    /// (see ``place(_:)``): under the lock, called in the event's body.
    func place(_ save: inout StoreMachine.LevelOp?, in machine: inout StoreMachine) {
        guard let sharedOrder, save?.wantsPlace == true else { return }
        machine.place(&save!, at: sharedOrder.takePlace())
    }

    /// Runs `body` under the lock and settles the event: the slots of the keys the machine let go of are given
    /// back, and what it let go of, those keys too, is released after unlocking.
    private func withState<Result>(_ body: (inout State) -> Result) -> Result {
        var released: StoreReleased?
        var keys = InlineFirstArray<AnyStoreKey>()
        let result = state.withLock { state in
            let result = body(&state)
            if !state.machine.placesWanted.isEmpty { place(&state.machine) }
            keys = state.settle()
            released = state.machine.takeReleased()
            return result
        }
        _ = consume keys
        if let released { finish(released) }
        return result
    }

    /// Releases what the machine let go of (here, unlocked) and publishes its notices.
    private func finish(_ released: consuming StoreReleased) {
        let hasNotices = released.hasNotices
        _ = consume released
        if hasNotices { publishNotices() }
    }

    /// The number of keys with a slot, and of slots ever made (for tests).
    var slotCounts: (keys: Int, slots: Int) {
        state.withLock { ($0.keys.count, $0.keys.capacity) }
    }
}

/// What the store's core asks of the work its face made with the store's types (``TypedStoreHooks``), when the
/// store tells events, has a fetch context or coordinates fetches. Held by the core: it holds neither.
protocol StoreHooks: AnyObject, Sendable {
    /// Tells the store's events that a caller joined fetch `id` of `key`.
    func tellJoined(_ id: Int, of key: StoreKeyRef)
    /// Tells the store's events that a read of `key` was answered by the value the store holds.
    func tellHeldValueRead(_ key: StoreKeyRef)
    /// The index of the level the store shares with other processes under a coordination of its fetches, if any.
    var coordinatedLevel: Int? { get }
    /// Notes what the read that starts fetch `id` found in the coordinated level (see
    /// ``StoreEngine/noteSharedLevelRead(_:beforeFetch:)``).
    func noteSharedLevelRead(_ found: Double, beforeFetch id: Int)
    /// Loads `key` from upstream for fetch `id` of `engine`, telling the store's events, in its fetch context, under
    /// its coordination with other processes (see ``StoreEngine/sendUpstream(_:of:completion:)``).
    func loadUpstreamWrapped(
        _ id: Int, of key: StoreKeyRef, in engine: StoreEngine, completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken
    /// Tells the store's events of the kept values let go of.
    func tellEvicted(_ keys: [AnyStoreKey])
}

/// Where a key's newly confirmed value comes from, as the entities it holds judge it.
enum ConfirmationSource: Sendable, Equatable {
    /// A change of the key (a write, an update, a fetch, an accepted optimistic change): what it holds is learned.
    case change
    /// Copies the shared entities brought to the key (a live update, or newer copies another key learned), as their
    /// table was when its latest copy had version `since`: the key learned nothing. While no copy was taken since,
    /// the key agrees with the table; otherwise it is judged as a ``change``.
    case entities(since: Int)
    /// A level's value, read back: judged whole, and not learned.
    case level
    /// The server's copy that a queued change met as a conflict: learned, and brought to every key holding its
    /// entities, those showing the same change included.
    case serverCopy
}

/// What follows a store's confirmed values from outside its core (the entities it shares with other keys): told after
/// unlocking, in the order of the key's changes.
protocol ConfirmationObserver: AnyObject, Sendable {
    /// The confirmed value of `key` (whose hash value is `hash`) changed from `previous` to `value` (`nil`: none, as
    /// after a removal), coming from `source`.
    func confirmed(
        _ key: AnyStoreKey, hash: Int, previous: (any StoreValueBox)?, value: (any StoreValueBox)?,
        source: ConfirmationSource)
    /// The store was cleared.
    func cleared()
}
