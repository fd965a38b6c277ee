#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A lease on fetching a key, shared by processes (the instances of a service): the process that takes it fetches,
/// the others wait for its value to reach the level they share. A row in a database table, an advisory lock.
public protocol FetchLease<Key>: Sendable {
    /// The type of the keys.
    associatedtype Key: Hashable & Sendable

    /// Takes the lease of `key` for `duration`, unless another process holds it; returns whether this one does now.
    func acquire(_ key: Key, for duration: Duration) async throws -> Bool

    /// Gives back the lease of `key` this process holds, once its fetch ended.
    func release(_ key: Key) async throws
}

/// How a ``Store``'s fetches are coordinated with other processes over a level they share, so that a key missing
/// everywhere is fetched once, not once per process.
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared", timeout: .seconds(1))],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     coordination: .lease(quoteLeases, sharedLevel: "shared"))
/// ```
///
/// Before a fetch goes upstream, the store takes the key's lease. Holding it, it fetches, and gives the lease back when
/// the upstream load ends (a lease whose process died lapses after `holding`). When another process holds it, the
/// store reads the shared level every `polling` for a value saved since its fetch began, for at most `waiting`: that
/// value is the fetch's answer. Past `waiting`, or when the lease cannot be reached, it fetches itself: a lease never
/// fails a read, it only spares fetches. "Saved since" is judged by the processes' clocks (the holder's store dates the
/// value): when the holder's clock is behind by more than a fetch takes, the waiting process does not take the value
/// and fetches after `waiting`: a second upstream call, never an old answer.
public struct FetchCoordination<Key: Hashable & Sendable>: Sendable {
    let acquire: @Sendable (Key) async throws -> Bool
    let release: @Sendable (Key) async throws -> Void
    let sharedLevel: String
    let waiting: Duration
    let polling: Duration

    /// Fetches coordinated by `lease`, whose holder's values the others wait for in the level named `sharedLevel`.
    /// - Parameters:
    ///   - lease: the lease the processes share.
    ///   - sharedLevel: the name of the store's level the processes share, where the holder's value arrives (a store
    ///     without a level of that name stops at its creation: a programming error).
    ///   - holding: how long a lease lasts when its process does not give it back (it died): longer than a fetch.
    ///   - waiting: how long a process that does not hold the lease waits for the value before fetching itself.
    ///   - polling: how often it reads the shared level meanwhile.
    public static func lease(
        _ lease: some FetchLease<Key>, sharedLevel: String, holding: Duration = .seconds(10),
        waiting: Duration = .seconds(2), polling: Duration = .milliseconds(50)
    ) -> FetchCoordination {
        FetchCoordination(
            acquire: { key in try await lease.acquire(key, for: holding) },
            release: { key in try await lease.release(key) },
            sharedLevel: sharedLevel, waiting: waiting, polling: polling)
    }
}

extension Store {
    /// Fetch `id`'s upstream load under `coordination`: fetched by this process when it takes the key's lease (or
    /// cannot reach it, or waited long enough); otherwise answered by the value the lease's holder saved to the shared
    /// level.
    func coordinatedLoad(
        _ id: Int, of key: Key, under coordination: FetchCoordination<Key>,
        completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        let pending = PendingLoad(completion)
        let began = now()
        let shared = levels.firstIndex { $0.name == coordination.sharedLevel }
        // The task is the load's first step; the upstream load, when it starts, its second.
        pending.startStep {
            let task = Task { [self] in
                let holds = (try? await coordination.acquire(key)) ?? true  // an unreachable lease: fetch
                if !holds, let shared,
                    let value = await awaitSharedValue(of: key, in: shared, since: began, under: coordination)
                {
                    return pending.complete(.success(value))
                }
                guard !Task.isCancelled else { return }
                pending.startStep {
                    sendUpstream(id, of: key) { result in
                        pending.complete(result)
                        // After the store took the answer: a value is on its way to the shared level.
                        if holds { Task { try? await coordination.release(key) } }
                    }
                }
            }
            return AnyCancellationToken { task.cancel() }
        }
        return pending
    }

    /// A value of `key` saved to level `index` at or after `since`, read every `polling` for at most `waiting`; `nil`
    /// when none came (or the wait was cancelled).
    private func awaitSharedValue(
        of key: Key, in index: Int, since: Date, under coordination: FetchCoordination<Key>
    ) async -> Value? {
        let deadline = ContinuousClock.now + coordination.waiting
        while ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: coordination.polling)
            } catch {
                return nil
            }
            let level = levels[index]
            let cached = await withCheckedContinuation { (read: CheckedContinuation<CachedValue<Value>?, Never>) in
                _ = level.read(key) { result in read.resume(returning: try? result.get()) }
            }
            if let cached, cached.savedAt >= since { return cached.value }
        }
        return nil
    }
}
