#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreEngine {
    /// A change whose closures a thread runs (outside the lock): the store's and the key's.
    struct RunningChange: Sendable {
        let engine: ObjectIdentifier
        let key: StoreKeyRef
    }

    /// Whether this thread runs a change of `key` now: the read asking is made from inside its closures (see
    /// ``StoreRead/start()``).
    func runsChange(of key: StoreKeyRef) -> Bool {
        // A thread that has made no list runs no change: asking makes none.
        RunningHere.made?.contains { running in
            running.engine == ObjectIdentifier(self) && running.key.hash == key.hash
                && running.key.isSameKey(as: key.object)
        } == true
    }

    /// Submits a change of the confirmed value of the key with `hash` that `isKey` recognizes (`make` makes its
    /// object), and runs the key's queue when it was idle.
    func submit(
        _ job: StoreMachine.Job, hash: Int, where isKey: (AnyStoreKey) -> Bool,
        making make: () -> AnyStoreKey
    ) {
        let now = now()
        var object: StoreKeyRef?
        let step = run(hash: hash, where: isKey, making: make, keeping: &object) { $0.submit(job, for: $1, now: now) }
        runChanges(of: object ?? StoreKeyRef(object: make(), hash: hash), from: consume step)
    }

    /// Confirms `value` for the key with `hash` that `isKey` recognizes (`make` makes its object), writes it to
    /// every level and shows it (see ``Store/write(_:for:)``): at once when the key's turn is free, else in turn.
    @usableFromInline
    func write(
        _ value: any StoreValueBox, hash: Int, where isKey: (AnyStoreKey) -> Bool,
        making make: () -> AnyStoreKey
    ) {
        let stored = StoredValue(value: value, origin: .local, savedAt: now())
        var save: StoreMachine.LevelOp?
        var object: StoreKeyRef?
        let atOnce = run(hash: hash, where: isKey, making: make, keeping: &object) { machine, slot in
            let effects = machine.writeAtOnce(stored, for: slot, save: &save)
            place(&save, in: &machine)
            return effects
        }
        guard let effects = consume atOnce else {
            return submit(.write(stored), hash: hash, where: isKey, making: make)
        }
        perform(effects, for: object, issuingFirst: consume save)
    }

    /// Submits a change of `key`'s confirmed value, and runs the key's queue when it was idle.
    func submit(_ job: StoreMachine.Job, of key: StoreKeyRef) {
        let now = now()
        // Named from then on as the store keeps it (`key` may be an equal key made before the store made it again).
        var object: StoreKeyRef?
        let step = run(key, keeping: &object) { $0.submit(job, for: $1, now: now) }
        runChanges(of: object ?? key, from: consume step)
    }

    /// Runs `key`'s queued changes, starting with `first` (or the next one when `nil`), until the queue is empty
    /// or waits for a level read. A change's closures run here, outside the lock.
    func runChanges(of key: StoreKeyRef, from first: consuming StoreMachine.Step?) {
        var given = first
        while true {
            // Taken and consumed, not copied: a step's effects hold several arrays.
            let step: StoreMachine.Step
            if let taken = given.take() {
                step = taken
            } else {
                let now = now()
                guard let next = run(key, { $0.nextChange(of: $1, now: now) }) else { return }
                step = next
            }
            switch consume step {
            case .queued:
                return
            case .loadBase(let generation):
                return loadBase(of: key, generation: generation)
            case .applied(let effects):
                perform(effects, for: key)
                if effects.endsTurn { return }
            case .run(let work):
                let running = RunningChange(engine: ObjectIdentifier(self), key: key)
                let result = RunningHere.current.run(running) { work.run() }
                let now = now()
                // The change's save is handed out in the step that commits it, as a write applied at once hands
                // out its own: no step more to take it.
                var save: StoreMachine.LevelOp?
                let effects = run(key) { machine, slot in
                    let effects = machine.commit(work, result: result, for: slot, now: now)
                    if effects.issueLevels {
                        save = machine.takeOnlyLevelOp(of: slot)
                        place(&save, in: &machine)
                    }
                    return effects
                }
                perform(effects, for: key, issuingFirst: consume save)
                if effects.endsTurn { return }
            }
        }
    }

    /// Reads the levels in order for the value of a key the store does not hold, for the change waiting for it.
    private func loadBase(of key: StoreKeyRef, generation: Int) {
        // What the levels hold is as stale as the invalidations made before say (judged outside the lock: a
        // predicate is the caller's code); one made while they are read marks the key's entry, which the change holds.
        let rules = run(key) { $0.staleRules(for: $1) }
        readBase(of: key, from: 0) { [self] hit, level in
            let staleSince = hit.flatMap { rules?.staleSince(key.anyKey, savedAt: $0.savedAt) }
            let effects = run(key) {
                $0.commitBase(hit, level: level, generation: generation, staleSince: staleSince, for: $1)
            }
            perform(effects, for: key)
            runChanges(of: key, from: nil)
        }
    }

    /// Reads `key` from the level at `index` and the slower ones after it, until one holds it.
    private func readBase(
        of key: StoreKeyRef, from index: Int,
        done: @escaping @Sendable (CachedValue<any StoreValueBox>?, Int) -> Void
    ) {
        guard index < levels.count else { return done(nil, 0) }
        _ = levels[index].read(key.object) { [self] result in
            guard case .success(let cached) = result else { return readBase(of: key, from: index + 1, done: done) }
            done(cached, index)
        }
    }
}
