#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What happened in a ``Store``, for logs, metrics and traces: hits and misses by level, level failures with the key
/// and the level, how long each level operation took, fetches started, joined and ended with their duration and that
/// of their upstream call, and how the processes sharing a level settled who fetches.
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (id: String) in api.quote(id) },
///     events: { event in
///         if case .fetchEnded(let key, _, let duration, let error) = event {
///             print("fetched \(key) in \(duration)", error.map { "failed: \($0)" } ?? "")
///         }
///     })
/// ```
/// Events are told on the thread where they happen, and must return quickly: ``fetchStarted(_:fetch:)``,
/// ``fetchJoined(_:fetch:)`` and ``heldValueRead(_:)`` in the caller's task (its task-local values: a request id, a
/// trace), the others where the level or the upstream load answered. A store without `events` pays nothing for them.
public enum StoreEvent<Key: Hashable & Sendable>: Sendable {
    /// A read took the value the store holds for the key, asking no level.
    case heldValueRead(Key)
    /// A level was read for the key: it had a value, had none, or failed (which the read counts as a miss).
    case levelRead(Key, level: String, outcome: LevelReadOutcome)
    /// A level's save or removal ended, with its failure (a timeout included) or `nil`; the key is `nil` for a
    /// removal of every value (a clear).
    case levelWritten(Key?, level: String, operation: LevelOperation, error: (any Error)?)
    /// The store asked upstream for the key's value: fetch `fetch` started (a refresh, a read that missed, a
    /// revalidation), on the thread of the caller that started it.
    case fetchStarted(Key, fetch: Int)
    /// A caller joined fetch `fetch` of the key, in flight, instead of starting one.
    case fetchJoined(Key, fetch: Int)
    /// The store let go of the value it kept for the key, a key no longer in use, to stay within `keptValues` or
    /// when asked to (``Store/trimMemory()``); its levels still hold it.
    case evicted(Key)
    /// Fetch `fetch` of the key ended after `duration`: with a value, with `error`, or cancelled (a
    /// `CancellationError`) once no caller waited for it any more.
    case fetchEnded(Key, fetch: Int, duration: Duration, error: (any Error)?)
    /// Under a ``FetchCoordination``, fetch `fetch` of the key learned after `duration` whether this process
    /// fetches: it took the key's lease, another process's value came, or it fetches without the lease.
    case fetchCoordinated(Key, fetch: Int, outcome: CoordinationOutcome, duration: Duration)
    /// A level's operation ended after `duration`, with its failure (a timeout included) or `nil` (a read that found
    /// no value did not fail); the key is `nil` for a removal of every value. Told right after the operation's
    /// ``levelRead(_:level:outcome:)`` or ``levelWritten(_:level:operation:error:)``.
    case levelOperationEnded(Key?, level: String, operation: LevelOperation, duration: Duration, error: (any Error)?)
    /// Fetch `fetch`'s call of the upstream ended after `duration`, with its failure or `nil`: the part of the fetch
    /// spent upstream, after its lease under a ``FetchCoordination`` (a fetch answered by another process asks
    /// none). Told right before the fetch's ``fetchEnded(_:fetch:duration:error:)``.
    case upstreamCalled(Key, fetch: Int, duration: Duration, error: (any Error)?)
}

/// How the processes sharing a level settled who fetches a key (see
/// ``StoreEvent/fetchCoordinated(_:fetch:outcome:duration:)``).
public enum CoordinationOutcome: String, Sendable {
    /// This process took the key's lease: it fetches (unless the shared level has a value saved just before).
    case acquired
    /// Another process held the lease, and its value arrived in the shared level while this one waited.
    case answeredByHolder
    /// Another process held the lease, and gave it back or let it lapse (it died) while this one waited: this one
    /// took it over, and fetches (unless the value is in the shared level).
    case takenOver
    /// Another process held the lease for longer than `waiting`: this one fetches without it.
    case waitedOut
    /// A fetch under the lease failed a moment ago (in this process or another) and left its failure on it, still
    /// lasting (see ``FetchFailureSharing``): this one fails with that failure, without fetching.
    case failedBefore
    /// The lease could not be reached (its call failed or took longer than its timeout): this one fetches
    /// without it.
    case unreachable
}

/// What a level's read found.
public enum LevelReadOutcome: Sendable {
    /// A value, saved at `savedAt` (the read may still find it too old and go on).
    case hit(savedAt: Date)
    /// No value, or an expired one.
    case miss
    /// The level failed, or took longer than its timeout.
    case failed(any Error)
}

extension StoreLevel {
    /// This level, telling `events` what each of its operations found and how long it took, with the key and the
    /// level's name.
    func reporting(to events: @escaping @Sendable (StoreEvent<Key>) -> Void) -> StoreLevel {
        let name = name
        let level = boxed
        @Sendable func written(_ key: Key?, _ operation: LevelOperation, _ completion: @escaping Completion<Void>)
            -> Completion<Void>
        {
            let started = ContinuousClock.now
            return { result in
                let error = result.failure
                events(.levelWritten(key, level: name, operation: operation, error: error))
                events(
                    .levelOperationEnded(
                        key, level: name, operation: operation, duration: ContinuousClock.now - started, error: error))
                completion(result)
            }
        }
        return StoreLevel(
            name: name,
            boxed: level.wrapped(
                read: { key, completion in
                    let started = ContinuousClock.now
                    return level.read(key) { result in
                        let key = StoreKey<Key>.key(of: key)
                        let outcome: LevelReadOutcome =
                            switch result {
                            case .success(let cached): .hit(savedAt: cached.savedAt)
                            case .failure(is CacheMiss): .miss
                            case .failure(let error): .failed(error)
                            }
                        events(.levelRead(key, level: name, outcome: outcome))
                        let error: (any Error)? = if case .failed(let error) = outcome { error } else { nil }
                        events(
                            .levelOperationEnded(
                                key, level: name, operation: .read, duration: ContinuousClock.now - started,
                                error: error))
                        completion(result)
                    }
                },
                save: { value, savedAt, key, completion in
                    level.save(value, savedAt, key, written(StoreKey<Key>.key(of: key), .save, completion))
                },
                removeValue: { key, completion in
                    level.removeValue(key, written(StoreKey<Key>.key(of: key), .removal, completion))
                },
                removeAll: { completion in level.removeAll(written(nil, .removalOfEveryValue, completion)) }))
    }
}

extension StoreEvent {
    /// Starts a fetch's upstream load with `start` and tells `events` when it ended, once: with its duration and its
    /// error when it completes, or with a `CancellationError` when it is cancelled first (no caller waits for it).
    static func loadTellingEnd<Output>(
        of key: Key, fetch id: Int, to events: @escaping @Sendable (StoreEvent<Key>) -> Void,
        completion: @escaping LoadCompletion<Output>,
        start: (@escaping LoadCompletion<Output>) -> any CancellationToken
    ) -> any CancellationToken {
        let started = ContinuousClock.now
        let ended = Locked(false)
        let end: @Sendable ((any Error)?) -> Void = { error in
            guard !ended.withLock({ exchange(&$0, with: true) }) else { return }
            events(.fetchEnded(key, fetch: id, duration: ContinuousClock.now - started, error: error))
        }
        let token = start { result in
            end(result.failure)
            completion(result)
        }
        return AnyCancellationToken {
            token.cancel()
            end(CancellationError())
        }
    }
}

extension Result {
    /// The failure, or `nil` for a success.
    var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
