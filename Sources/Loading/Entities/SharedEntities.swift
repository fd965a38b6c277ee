/// Entities (identified parts of values: a friend in a list, in a page, on its detail screen) shared by the keys of one
/// or more stores: a newer copy of an entity, wherever it comes from, reaches every key that holds it.
///
/// ```swift
/// let friends = SharedEntities<Friend>()
/// let lists = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (query: String) in api.search(query) },
///     entities: friends.held(in: .elements))
/// let details = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (id: String) in api.friend(id) },
///     entities: friends.held(in: .whole))
/// ```
///
/// Then a live update of one friend reaches every screen showing it:
///
/// ```swift
/// friends.update(Friend(id: "u1", name: "Ada L."))  // every list holding u1 and its detail show it, once each
/// ```
///
/// - A copy a store **learns** (fetched, written, updated, confirmed by a change's commit, saved by another process)
///   is taken as the entity's copy and written to every other key holding the entity (an update of each, so each
///   observer sees one change). A copy **read back** from a level, or one a key still holds unchanged while another
///   key learned a newer one, is replaced by the newer one.
/// - Which copy wins when two disagree: the one learned last, by the order the stores confirmed them (a fetch that
///   answers after another brings the copy everywhere). Give `isNewer` (comparing a version or a modification date
///   the server sends) to let the copies decide instead: an older copy then never replaces a newer one.
/// - A copy another key learned reaches a key whose own fetch is in flight at once, and what that fetch brings,
///   learned later, replaces it (and reaches the other keys in turn). A live update (``update(_:)``) made while a
///   fetch runs is applied again to what the fetch brings, as a store's `update(_:_:)` is.
/// - A caller hears of a value (a read's answer, a page appended) only once the entities know the key holds it: an
///   edit of an entity made from then on reaches that key.
/// - ``mutate(_:_:commit:completion:)`` changes an entity optimistically in every key holding it, with one commit:
///   refused, it is undone in all of them, and the other changes pending there stay. A store's own
///   ``Store/mutate(_:_:commit:completion:)`` of a key does the same for the copies its change makes.
/// - Each change of a key costs what changed in its value (the entities between the beginning and the end the old and
///   new values share), plus the keys the new copies reach; a value read back is judged whole. A key the new copies
///   reach costs its update, not a second judgement (unless another copy came meanwhile). An entity appears once in a
///   value.
/// - The entities no key holds are forgotten; the keys followed are bounded by `keptKeys` (the least recently
///   confirmed are let go of; a key let go of is followed again once the store confirms it anew). A store's clear
///   forgets its keys.
public final class SharedEntities<Entity: Identifiable & Equatable & Sendable>: Sendable where Entity.ID: Sendable {
    private let state: Locked<EntityTable<Entity>>
    private let stores = Locked<[Int: StoreAccess]>([:])
    /// The keys each ``mutate(_:_:commit:completion:)`` in flight changes, by entity and by the mutation's number:
    /// each confirms the change itself, so what one confirms is not brought to the others.
    private let changing = Locked<(keys: [Entity.ID: [Int: Set<HeldKey>]], numbered: Int)>(([:], 0))
    private let isNewer: (@Sendable (Entity, Entity) -> Bool)?

    /// How the entities reach one store's keys.
    struct StoreAccess: Sendable {
        /// Updates a key (named as the store holds it: no look-up by its own type) with the newer copies `newer`
        /// gives; applied again to what a fetch of the key in flight brings when it `replays` (a live update), not
        /// otherwise (copies another key learned). `since` is the latest version of a copy when `newer` was made:
        /// the key's confirmation reports it (see ``SharedEntities/agrees(_:since:)``).
        let update:
            @Sendable (
                _ key: StoreKeyRef, _ newer: @escaping @Sendable (Entity) -> Entity?, _ replays: Bool,
                _ since: Int
            ) -> Void
        /// Changes a key optimistically with `newer`, sent with `commit`.
        let mutate:
            @Sendable (
                _ key: AnyStoreKey, _ newer: @escaping @Sendable (Entity) -> Entity?,
                _ commit: AnyLoader<Void>, _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void
            ) -> any CancellationToken
    }

    /// Entities shared by the stores given ``held(in:)``, following at most `keptKeys` keys; `isNewer(a, b)`, when
    /// given, tells whether copy `a` is newer than copy `b`.
    public init(keptKeys: Int = 10_000, isNewer: (@Sendable (Entity, Entity) -> Bool)? = nil) {
        state = Locked(EntityTable(keptKeys: keptKeys))
        self.isNewer = isNewer
    }

    /// What a ``Store`` whose values hold these entities at `path` is given (`Store(…, entities:)`).
    public func held<Value>(in path: EntityPath<Value, Entity>) -> EntitySharing<Value> {
        EntitySharing(registration: EntityRegistration(entities: self, path: path))
    }

    /// The copy of entity `id` the keys show, when one holds it.
    public func entity(_ id: Entity.ID) -> Entity? {
        state.withLock { $0.copy(of: id) }
    }

    /// Shows `entity` in every key holding an entity with its id (a live update of one entity); nothing when none
    /// does, or when `isNewer` says the copy shown is newer.
    public func update(_ entity: Entity) {
        while true {
            var version = 0
            let copy = state.withLock { $0.copy(of: entity.id, version: &version) }
            guard let copy, copy != entity, isNewer?(copy, entity) != true else { return }
            let taken = state.withLock { $0.take(entity, version: version) }
            withExtendedLifetime(taken?.released) {}
            guard let taken else { continue }  // another copy came meanwhile: judged against it
            // Each key shows this copy in place of its own (applied again to what a fetch in flight brings, unless
            // `isNewer` says the copy there is newer): no look-up of the table per key.
            let isNewer = isNewer
            let newer: @Sendable (Entity) -> Entity? = { shown in
                guard shown.id == entity.id, shown != entity, isNewer?(shown, entity) != true else { return nil }
                return entity
            }
            let accesses = stores.withLock { $0 }
            for key in taken.holders { accesses[key.store]?.update(key.ref, newer, true, taken.since) }
            return
        }
    }

    /// Changes entity `id` with `change` in every key holding it, at once, and sends the change with `commit` (one
    /// load, whatever the number of keys). Accepted, the changed copy is confirmed everywhere; refused, the change is
    /// undone everywhere, and the other changes pending there stay. `completion` receives the commit's outcome once
    /// every key has settled it. Cancelling the returned token cancels the commit and undoes the change.
    @discardableResult
    public func mutate(
        _ id: Entity.ID, _ change: @escaping @Sendable (Entity) -> Entity, commit: some Loader<Void>,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) -> any CancellationToken {
        let keys = state.withLock { $0.holders(of: id) }
        return mutate(
            [id], in: keys, { $0.id == id ? change($0) : nil }, origin: nil, commit: commit.eraseToAnyLoader(),
            completion: completion)
    }

    /// A store's optimistic change of its key `origin` changed the copies of `copies`: the other keys holding those
    /// entities show them at once, sent with the same commit, and undo them with it.
    func mutate(
        replacing copies: [Entity.ID: Entity], from origin: HeldKey, _ change: @escaping OriginChange,
        commit: AnyLoader<Void>, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> any CancellationToken {
        var keys = state.withLock { table in
            copies.keys.reduce(into: Set<HeldKey>()) { keys, id in keys.formUnion(table.holders(of: id)) }
        }
        keys.remove(origin)
        return mutate(
            Array(copies.keys), in: keys, { copies[$0.id] }, origin: (origin, change), commit: commit,
            completion: completion)
    }

    /// Changes `keys` with `change`, and `origin` with its own change, at once, sent with one commit: each key
    /// confirms the change of `ids` itself. `completion` receives the commit's outcome once every key settled it.
    private func mutate(
        _ ids: [Entity.ID], in keys: Set<HeldKey>, _ change: @escaping @Sendable (Entity) -> Entity?,
        origin: (key: HeldKey, change: OriginChange)?, commit: AnyLoader<Void>,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> any CancellationToken {
        let shared = SharedCommit(commit)
        let accesses = stores.withLock { stores in keys.compactMap { key in stores[key.store].map { (key, $0) } } }
        guard !accesses.isEmpty || origin != nil else { return shared.load(completion) }
        var changed = Set(accesses.map(\.0))
        if let origin { changed.insert(origin.key) }
        let number = changing.withLock { [changed] changing in
            changing.numbered += 1
            for id in ids { changing.keys[id, default: [:]][changing.numbered] = changed }
            return changing.numbered
        }
        let settled = Locked(changed.count)
        let keySettled: @Sendable (Result<Void, any Error>) -> Void = { [weak self] result in
            let last = settled.withLock { count -> Bool in
                count -= 1
                return count == 0
            }
            guard last else { return }
            let done = self?.changing.withLock { changing -> [Set<HeldKey>?] in
                ids.map { id in
                    defer { if changing.keys[id]?.isEmpty == true { changing.keys[id] = nil } }
                    return changing.keys[id]?.removeValue(forKey: number)
                }
            }
            withExtendedLifetime(done) {}
            // The commit's outcome; a key's own when the commit never answered (a clear came first).
            completion(shared.outcome ?? result)
        }
        var tokens = accesses.map { key, access in access.mutate(key.object, change, shared.loader, keySettled) }
        if let origin { tokens.append(origin.change(shared.loader, keySettled)) }
        return AnyCancellationToken { [tokens] in for token in tokens { token.cancel() } }
    }

    /// Changes entity `id` in every key holding it at once, sends the change with `commit`, and returns once every
    /// key settled it, as ``mutate(_:_:commit:completion:)`` does: accepted, the changed copy is confirmed
    /// everywhere; refused, this throws the commit's error once the change is undone everywhere. Cancelling the task
    /// cancels the commit and undoes the change; this then throws `CancellationError`.
    ///
    /// ```swift
    /// try await entities.mutate("u1", { $0.renamed("Ada L.") }, commit: api.rename("u1", to: "Ada L."))
    /// ```
    public func mutate(
        _ id: Entity.ID, _ change: @escaping @Sendable (Entity) -> Entity, commit: some Loader<Void>
    ) async throws {
        try await AnyLoader<Void> { completion in
            self.mutate(id, change, commit: commit, completion: completion)
        }.load()
    }

    /// The number of keys followed (for tests of the bound).
    var keyCount: Int { state.withLock { $0.keyCount } }

    // MARK: What the stores tell

    /// A number for a new store sharing the entities.
    func addStore() -> Int {
        state.withLock { $0.addStore() }
    }

    /// Lets the entities reach the keys of store `store` through `access`.
    func setAccess(_ access: StoreAccess, of store: Int) {
        stores.withLock { $0[store] = access }
    }

    /// Store `store` was cleared: its keys are no longer followed.
    func forget(store: Int) {
        let released = state.withLock { $0.forget(store: store) }
        withExtendedLifetime(released) {}
    }

    /// Store `store` is gone.
    func removeStore(_ store: Int) {
        forget(store: store)
        let access = stores.withLock { $0.removeValue(forKey: store) }
        withExtendedLifetime(access) {}
    }

    /// Notes that `key` was confirmed with copies the entities brought it, as of the latest version `since`, when no
    /// copy was taken since: the key shows the copies the entities hold, and only becomes the most recently
    /// confirmed. `false` when a copy was taken since, or the key is not followed: its value is to be judged
    /// (``confirmed(_:previous:value:source:)``).
    func agrees(_ key: HeldKey, since: Int) -> Bool {
        var released: [Any] = []
        let agrees = state.withLock { $0.touch(key, ifNoCopySince: since, releasing: &released) }
        withExtendedLifetime(released) {}  // after unlocking
        return agrees
    }

    /// `key`'s confirmed value changed from one holding `previous` to one holding `value`, coming from `source`.
    /// Takes the copies the key learned, brings them to the other keys, and brings newer copies to this key when it
    /// holds older ones.
    func confirmed(_ key: HeldKey, previous: [Entity], value: [Entity], source: ConfirmationSource) {
        let readBack = source == .level
        // A key followed that learned a value looks only at what changed in it: the entities between the beginning
        // and the end the two values share (an edit of one friend in a long list costs the comparison, not an index
        // of the list). The others were judged when the key last confirmed, and a newer copy taken since is on its
        // way to the key. A value read back, or a key not followed, is judged whole. A value whose entities did not
        // change costs the key's place in the order of use.
        var (start, end, previousEnd) = (0, value.count, previous.count)
        if !readBack {
            while start < end, start < previousEnd, previous[start] == value[start] { start += 1 }
            while end > start, previousEnd > start, previous[previousEnd - 1] == value[end - 1] {
                end -= 1
                previousEnd -= 1
            }
            var released: [Any] = []
            if start == end, start == previousEnd, state.withLock({ $0.touch(key, releasing: &released) }) {
                return  // what was let go of is released here, after unlocking
            }
        }
        learned(key, previous: previous, value: value, changed: start..<end, replaced: start..<previousEnd, source)
    }

    /// The part of ``confirmed(_:previous:value:source:)`` that looks at the entities: the copies of entities no
    /// key held are taken in the step that notes the key's.
    private func learned(
        _ key: HeldKey, previous: [Entity], value: [Entity], changed: Range<Int>, replaced: Range<Int>,
        _ source: ConfirmationSource
    ) {
        var known: [Entity] = []
        let confirming = state.withLock { table in
            table.confirm(
                key, value, changed: changed, replaced: replaced, of: previous, whole: source == .level, known: &known)
        }
        withExtendedLifetime(confirming.released) {}
        guard !confirming.compared.isEmpty else { return }
        compare(
            key, value, known, confirming, source: source,
            before: previous[confirming.windowed ? replaced : 0..<previous.count])
    }

    /// Compares the candidates of `value` with the copies `known` (unlocked: the app's code), takes those newer
    /// unless another copy came meanwhile, and brings the copies to the keys that hold older ones. `before` is what
    /// the key held of them before: a copy not there was learned, unless the value was read back.
    private func compare(
        _ key: HeldKey, _ value: [Entity], _ known: [Entity], _ confirming: Confirming, source: ConfirmationSource,
        before: ArraySlice<Entity>
    ) {
        // Most often the copies are those known (a key brought the copy the entities hold): nothing to judge.
        let differing = confirming.compared.indices.filter { known[$0] != value[confirming.compared[$0]] }
        guard !differing.isEmpty else { return }
        let readBack = source == .level
        var held: [Entity.ID: Entity] = [:]
        if !readBack {
            for entity in before { held[entity.id] = entity }
        }
        var olderHere = false
        var taking: [Entity] = []
        var versions: [Int] = []
        for position in differing {
            let entity = value[confirming.compared[position]]
            let learned = !readBack && held[entity.id] != entity  // new in this key, or changed in it
            if isNewer(entity, than: known[position], learned: learned) {
                taking.append(entity)
                versions.append(confirming.versions[position])
            } else {
                olderHere = true
            }
        }
        var others = Set<HeldKey>()
        var spread: [Entity.ID] = []
        var since = confirming.since
        if !taking.isEmpty {
            let taken = state.withLock { $0.take(taking, versions: versions) }
            spread = taken.spread
            since = taken.since
            withExtendedLifetime(taken.released) {}
            olderHere = olderHere || taken.missed  // another copy came meanwhile: this key gets it
            others = taken.holders
            others.remove(key)
            // The keys changing the entity with this one confirm the change themselves; a server's copy met as a
            // conflict is no such change: they get it too, under their change.
            if !others.isEmpty, source != .serverCopy {
                changing.withLock { changing in
                    for id in taken.spread {
                        for keys in (changing.keys[id] ?? [:]).values where keys.contains(key) {
                            others.subtract(keys)
                        }
                    }
                }
            }
        }
        if olderHere { bringNewerCopies(to: key, replays: false, since: since) }
        for other in others { bringNewerCopies(to: other, replays: false, of: spread, since: since) }
    }

    /// Whether `entity` replaces `copy`: as `isNewer` says when it tells them apart, else when the key learned it.
    private func isNewer(_ entity: Entity, than copy: Entity, learned: Bool) -> Bool {
        guard let isNewer else { return learned }
        if isNewer(entity, copy) { return true }
        if isNewer(copy, entity) { return false }
        return learned
    }

    /// Updates `key` with the copies known for the entities it holds, where they differ: copies another key learned
    /// (a fetch of `key` in flight brings a copy learned later, which wins), or a live update that `replays` (applied
    /// again to what such a fetch brings). Only the entities of `ids` are looked up when given (the others are not
    /// newer here). `since`: the latest version of a copy, read before the copies are looked up.
    private func bringNewerCopies(to key: HeldKey, replays: Bool, of ids: [Entity.ID]? = nil, since: Int) {
        guard let access = stores.withLock({ $0[key.store] }) else { return }
        access.update(
            key.ref,
            { [weak self] entity in
                if let ids, !ids.contains(entity.id) { return nil }
                guard let copy = self?.state.withLock({ $0.copy(of: entity.id) }), copy != entity else {
                    return nil
                }
                return copy
            }, replays, since)
    }
}

/// What a ``Store`` sharing entities is given: made by ``SharedEntities/held(in:)``.
public struct EntitySharing<Value: Sendable>: Sendable {
    let registration: any EntityRegistering<Value>
}
