#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    // MARK: Invalidation

    /// Marks `key`'s value stale: when the key is observed, it is fetched anew at once (the value stays shown until
    /// the fresh one arrives, or with the fetch's error attached when it fails); otherwise its next cache-first
    /// read fetches. The value stays in the levels, and a cache-only read still answers with it.
    ///
    /// ```swift
    /// api.rename("u1", to: "Ada L.").load { _ in friends.invalidate("u1") }   // the server changed it
    /// ```
    /// A fetch whose request went out before the invalidation does not make the value fresh again; one sent after
    /// it does (a fetch still waiting for the network counts as sent after), and so does a ``write(_:for:)``. While
    /// an observed key's fetch runs, any number of invalidations start one more fetch, once it ends; offline, a
    /// store that waits for the network sends one request for them all. The store judges the order of an
    /// invalidation and a fetch or write by its own count, not the clock: a clock set back after an invalidation
    /// does not make a value fetched since stale again.
    public func invalidate(_ key: Key) {
        let now = engine.now()
        let (observed, folded) = locked(key) { $0.invalidate($1, matching: Self.matching(key), at: now) }
        withExtendedLifetime(folded) {}  // a record dropped from the limit, released after unlocking
        if observed { engine.refetch(StoreKeyRef(object: StoreKey(key), hash: key.hashValue)) }
    }

    /// Marks stale every key `isStale` accepts, those the store holds and those only its levels hold; the
    /// observed ones are fetched anew at once (see ``invalidate(_:)``).
    ///
    /// ```swift
    /// pages.invalidate { $0.hasPrefix("search:") }   // every search result list
    /// ```
    /// `isStale` runs outside the store's lock, on keys the store holds now and, for keys only the levels hold, on
    /// their next read. The store remembers the last 64 such invalidations; an older one then counts as an
    /// invalidation of every value saved before it (more is refetched, never less).
    public func invalidate(where isStale: @escaping @Sendable (Key) -> Bool) {
        let now = engine.now()
        let (mark, keys, folded) = lockedWithKeys { machine, keys in
            let (mark, slots, folded) = machine.beginInvalidation({ ($0 as? Key).map(isStale) ?? false }, at: now)
            return (mark, slots.map { Self.key(at: $0, in: keys) }, folded)
        }
        withExtendedLifetime(folded) {}
        let matching = keys.filter(isStale)
        let observed = lockedWithKeys { machine, keys in
            // A key dropped meanwhile has no slot: nothing of it to mark.
            let slots = matching.compactMap { Self.slot(of: $0, in: keys) }
            return machine.markStale(slots, mark: mark).map { keys.ref(at: $0) }
        }
        for key in observed { engine.refetch(key) }
    }

    /// Marks every value stale, in the store and in its levels; the observed keys are fetched anew at once (see
    /// ``invalidate(_:)``).
    public func invalidateAll() {
        let now = engine.now()
        let (observed, dropped) = lockedWithKeys { machine, keys in
            let (observed, dropped) = machine.invalidateAll(at: now)
            return (observed.map { keys.ref(at: $0) }, dropped)
        }
        withExtendedLifetime(dropped) {}
        for key in observed { engine.refetch(key) }
    }

    // MARK: Revalidation

    /// Fetches anew every observed key that is not fresh: invalidated, older than the store's `maxAge` (every
    /// value, when the store has none), or with no value yet. A key whose fetch is in flight is left to it, and
    /// nothing happens while the store's ``NetworkMode`` says the network cannot be reached.
    ///
    /// What the triggers of ``revalidate(on:)`` call; call it yourself on any other occasion.
    public func revalidate() {
        guard !network.isOffline else { return }
        let now = engine.now()
        let targets = lockedWithKeys { machine, keys in
            machine.revalidationTargets(now: now, maxAgeSeconds: engine.maxAgeSeconds).map { keys.ref(at: $0) }
        }
        for key in targets { engine.refetch(key) }
    }

    /// Refreshes, one after another, the keys that are not fresh (invalidated, older than the store's `maxAge`, every
    /// value when it has none, or with no value yet) among those observed now or observed earlier and still held,
    /// the one observed most recently first; starts no fetch once `budget` has passed on `clock` (by default
    /// `ContinuousClock`), nor after the calling task is cancelled (which also cancels the fetch running); then
    /// flushes the levels (``flush(completion:)``) and returns what it did. For the time an app is given in the
    /// background (`BGAppRefreshTask`):
    ///
    /// ```swift
    /// let refresh = Task { await store.revalidate(within: .seconds(25)) }
    /// task.expirationHandler = { refresh.cancel() }  // the system wants the time back: stop
    /// let report = await refresh.value
    /// task.setTaskCompleted(success: report.failed.isEmpty)
    /// ```
    ///
    /// A fetch started before the deadline runs to its end: give a budget that leaves room for one. Offline (the
    /// store's ``NetworkMode``), nothing is fetched and every key is skipped.
    public func revalidate<C: Clock>(
        within budget: C.Duration, clock: C = ContinuousClock()
    ) async -> RevalidationReport<Key> {
        let deadline = clock.now.advanced(by: budget)
        let now = engine.now()
        var targets = lockedKeys { $0.budgetTargets(now: now, maxAgeSeconds: engine.maxAgeSeconds) }[...]
        var report = RevalidationReport<Key>()
        while let key = targets.first, !Task.isCancelled, clock.now < deadline, !network.isOffline {
            targets.removeFirst()
            do {
                _ = try await freshValue(of: key).load()
                report.refreshed.append(key)
            } catch {
                if Task.isCancelled { report.skipped.append(key) } else { report.failed.append((key, error)) }
            }
        }
        report.skipped += targets
        await withCheckedContinuation { done in flush { done.resume() } }
        return report
    }

    /// Calls ``revalidate()`` each time one of `triggers` fires, until the returned subscription is cancelled or
    /// released (the store itself is not kept alive by it).
    ///
    /// ```swift
    /// let revalidation = store.revalidate(on: .foreground(lifecycle), .reconnect(connectivity))
    /// ```
    public func revalidate(on triggers: RevalidationTrigger...) -> StreamSubscription {
        EventStream.merge(triggers.map(\.events)).sink { [weak self] in self?.revalidate() }
    }
}

/// What ``Store/revalidate(within:clock:)`` did with the keys it looked at, each in one list.
public struct RevalidationReport<Key: Hashable & Sendable>: Sendable {
    /// The keys fetched anew, in the order they were.
    public internal(set) var refreshed: [Key] = []
    /// The keys whose fetch failed, with the failure (their values stay as they were shown).
    public internal(set) var failed: [(key: Key, error: any Error)] = []
    /// The keys not fetched: the budget ran out, the task was cancelled (the fetch it cancelled included), or the
    /// store was offline.
    public internal(set) var skipped: [Key] = []
}
