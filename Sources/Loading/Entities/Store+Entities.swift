/// How a store changes its own key optimistically, as part of a change the entities spread: its change, sent with
/// the commit given, the token undoing it.
typealias OriginChange =
    @Sendable (_ commit: AnyLoader<Void>, _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void) ->
    any CancellationToken

/// How a store sharing entities registers with its ``SharedEntities``, made where the entity's type is known.
protocol EntityRegistering<Value>: Sendable {
    associatedtype Value: Sendable
    /// The observer of a new store's confirmed values.
    func observer<Key: Hashable & Sendable>(for keys: Key.Type) -> EntityObserver<Key, Value>
}

struct EntityRegistration<Value: Sendable, Entity: Identifiable & Equatable & Sendable>: EntityRegistering
where Entity.ID: Sendable {
    let entities: SharedEntities<Entity>
    let path: EntityPath<Value, Entity>

    func observer<Key: Hashable & Sendable>(for keys: Key.Type) -> EntityObserver<Key, Value> {
        let (entities, path) = (entities, path)
        let store = entities.addStore()
        return EntityObserver(
            confirmed: { key, hash, previous, value, source in
                let held = HeldKey(store: store, object: key, hash: hash)
                // Copies the entities brought, none taken since: the key agrees with them, nothing to look at.
                if case .entities(let since) = source, entities.agrees(held, since: since) { return }
                entities.confirmed(
                    held, previous: Self.entities(in: previous, at: path), value: Self.entities(in: value, at: path),
                    source: source)
            },
            forget: { entities.forget(store: store) },
            release: { entities.removeStore(store) },
            attach: { (target: Store<Key, Value>) in
                entities.setAccess(Self.access(to: target, path: path), of: store)
            },
            mutate: { target, key, change, origin, commit, completion in
                // The copies the change makes of the entities the key shows: they are shown in every key holding
                // them at once, with the same commit.
                let shown = target.state(for: key).value
                let before = shown.map(path.entities) ?? []
                guard !before.isEmpty, let after = change(shown).map(path.entities) else { return nil }
                // Only what changed between the beginning and the end the two share is looked at (a rename in a
                // long list costs the comparison, not an index of the list).
                var (start, end, beforeEnd) = (0, after.count, before.count)
                while start < end, start < beforeEnd, before[start] == after[start] { start += 1 }
                while end > start, beforeEnd > start, before[beforeEnd - 1] == after[end - 1] {
                    end -= 1
                    beforeEnd -= 1
                }
                let old = Dictionary(
                    before[start..<beforeEnd].map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
                var copies: [Entity.ID: Entity] = [:]
                for entity in after[start..<end] where old[entity.id].map({ $0 != entity }) == true {
                    copies[entity.id] = entity
                }
                guard !copies.isEmpty else { return nil }
                let held = HeldKey(store: store, object: StoreKey(key), hash: key.hashValue)
                return entities.mutate(
                    replacing: copies, from: held, origin, commit: commit, completion: completion)
            })
    }

    /// The entities the value boxed in `box` holds at `path` (none without a value).
    private static func entities(in box: (any StoreValueBox)?, at path: EntityPath<Value, Entity>) -> [Entity] {
        guard let box else { return [] }
        return path.entities((box as! ValueBox<Value>).value)
    }

    /// How the entities reach `store`'s keys: updates and optimistic changes of the entities at `path`, holding the
    /// store weakly.
    private static func access<Key: Hashable & Sendable>(
        to store: Store<Key, Value>, path: EntityPath<Value, Entity>
    ) -> SharedEntities<Entity>.StoreAccess {
        @Sendable func replacing(_ newer: @escaping @Sendable (Entity) -> Entity?) -> @Sendable (Value?) -> Value? {
            { value in
                guard let value else { return nil }
                return path.replacing(value, newer) ?? value
            }
        }
        return SharedEntities<Entity>.StoreAccess(
            update: { [weak store] key, newer, replays, since in
                guard let store else { return }
                // The change runs on the box the store keeps: a value none of whose entities is newer keeps its box.
                let change: StoreMachine.Change = { box in
                    guard let box else { return nil }
                    guard let replaced = path.replacing((box as! ValueBox<Value>).value, newer) else { return box }
                    return ValueBox(replaced)
                }
                store.updateEntities(of: key, change, replays: replays, since: since)
            },
            mutate: { [weak store] key, newer, commit, completion in
                guard let store else {
                    completion(.failure(StoreError.cleared))
                    return AnyCancellationToken {}
                }
                let key = StoreKey<Key>.key(of: key)
                return store.mutateHere(key, replacing(newer), commit: commit, completion: completion)
            })
    }
}

/// Tells a store's ``SharedEntities`` of each change of its confirmed values and of its clears; forgets the store's
/// keys there when the store goes.
final class EntityObserver<Key: Hashable & Sendable, Value: Sendable>: ConfirmationObserver {
    private let confirmedValues: Confirmed
    private let forget: @Sendable () -> Void
    private let release: @Sendable () -> Void
    private let attaching: @Sendable (Store<Key, Value>) -> Void
    private let mutating: Mutate

    /// A key's confirmed value changed: its object and hash value, the boxes of the values before and after, and
    /// whether it was read back.
    typealias Confirmed =
        @Sendable (AnyStoreKey, Int, (any StoreValueBox)?, (any StoreValueBox)?, ConfirmationSource) -> Void

    /// A store's optimistic change of a key, with its commit: sent through the entities when it changes copies of
    /// entities (`nil` when it changes none); `origin` makes the change in the key itself.
    typealias Mutate =
        @Sendable (
            _ store: Store<Key, Value>, _ key: Key, _ change: @escaping @Sendable (Value?) -> Value?,
            _ origin: @escaping OriginChange, _ commit: AnyLoader<Void>,
            _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> (any CancellationToken)?

    init(
        confirmed: @escaping Confirmed, forget: @escaping @Sendable () -> Void,
        release: @escaping @Sendable () -> Void, attach: @escaping @Sendable (Store<Key, Value>) -> Void,
        mutate: @escaping Mutate
    ) {
        confirmedValues = confirmed
        self.forget = forget
        self.release = release
        attaching = attach
        mutating = mutate
    }

    /// Makes `store`'s change of `key` in every key holding the entities it changes, the key's own with `origin`;
    /// `nil` when it changes none (then nothing is made).
    func mutate(
        in store: Store<Key, Value>, _ key: Key, _ change: @escaping @Sendable (Value?) -> Value?,
        origin: @escaping OriginChange, commit: AnyLoader<Void>,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (any CancellationToken)? {
        mutating(store, key, change, origin, commit, completion)
    }

    deinit {
        release()
    }

    /// Lets the entities reach `store`'s keys (once the store is made).
    func attach(_ store: Store<Key, Value>) {
        attaching(store)
    }

    func confirmed(
        _ key: StoreKeys.Object, hash: Int, previous: (any StoreValueBox)?, value: (any StoreValueBox)?,
        source: ConfirmationSource
    ) {
        confirmedValues(key, hash, previous, value, source)
    }

    func cleared() {
        forget()
    }
}

/// One commit shared by the optimistic changes of several keys: started by the first of them to ask, answering each
/// with its outcome; cancelled when every key let go of it before it answered.
final class SharedCommit: Sendable {
    private struct State: Sendable {
        var started = false
        var outcome: Result<Void, any Error>?
        var waiting: [Int: LoadCompletion<Void>] = [:]
        var next = 0
        var token: (any CancellationToken)?
    }

    private let commit: AnyLoader<Void>
    private let state = Locked(State())

    init(_ commit: AnyLoader<Void>) {
        self.commit = commit
    }

    /// The commit as each key's change sends it.
    var loader: AnyLoader<Void> {
        AnyLoader { [self] completion in load(completion) }
    }

    /// How the commit ended; `nil` until it has.
    var outcome: Result<Void, any Error>? {
        state.withLock { $0.outcome }
    }

    /// Joins the commit (starting it when it has not started), answering `completion` with its outcome.
    func load(_ completion: @escaping LoadCompletion<Void>) -> any CancellationToken {
        let (answer, id, starts) = state.withLock { state -> (Result<Void, any Error>?, Int, Bool) in
            if let outcome = state.outcome { return (outcome, 0, false) }
            state.next += 1
            state.waiting[state.next] = completion
            defer { state.started = true }
            return (nil, state.next, !state.started)
        }
        if let answer {
            completion(answer)
            return AnyCancellationToken {}
        }
        if starts {
            let token = commit.load { [self] result in finish(result) }
            let abandoned = state.withLock { state -> Bool in
                guard state.outcome == nil else { return false }
                guard !state.waiting.isEmpty else { return true }
                state.token = token
                return false
            }
            if abandoned { token.cancel() }
        }
        return AnyCancellationToken { [self] in leave(id) }
    }

    private func finish(_ result: Result<Void, any Error>) {
        let waiting = state.withLock { state -> [LoadCompletion<Void>] in
            guard state.outcome == nil else { return [] }
            state.outcome = result
            state.token = nil
            return Array(exchange(&state.waiting, with: [:]).values)
        }
        for completion in waiting { completion(result) }
    }

    /// A key let go of the commit (its change was cancelled): the last to go cancels it.
    private func leave(_ id: Int) {
        let (left, token) = state.withLock { state -> (LoadCompletion<Void>?, (any CancellationToken)?) in
            guard let left = state.waiting.removeValue(forKey: id) else { return (nil, nil) }
            guard state.waiting.isEmpty, state.outcome == nil else { return (left, nil) }
            return (left, exchange(&state.token, with: nil))
        }
        token?.cancel()
        withExtendedLifetime(left) {}
    }
}
