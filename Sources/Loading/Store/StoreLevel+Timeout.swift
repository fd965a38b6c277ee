#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreLevel {
    /// A level written at once whose every operation is given at most `timeout`: one that has not finished by then
    /// ends with ``LevelTimeoutError`` (within a quarter of `timeout` after it, as `scheduler` tells time), and what
    /// it answers later is ignored. A read that times out counts as a miss (the store reads the next level, or
    /// fetches); a write or removal that times out is told to the store's `onWriteFailure`, and the store keeps the
    /// value as it keeps any value no level could save. A test gives a `TestScheduler` and moves its time.
    ///
    /// ```swift
    /// let store = Store(
    ///     levels: [.cache(memory, name: "memory"), .cache(sharedCache, name: "shared", timeout: .milliseconds(200))],
    ///     fetch: LoaderFamily { (id: String) in api.quote(id) })
    /// ```
    public static func cache(
        _ cache: some KeyedCache<Key, Value>, name: String, timeout: Duration, scheduler: some Scheduler = .global()
    ) -> StoreLevel {
        let deadline = LevelDeadline(level: name, interval: timeout, scheduler: scheduler)
        return StoreLevel(
            name: name,
            read: { key, completion in
                deadline.run(.read, completion) { done in
                    cache.value(for: key, completion: done)
                    return nil
                }
            },
            save: { value, savedAt, key, completion in
                deadline.run(.save, completion) { done in
                    cache.save(
                        value, for: key, savedAt: Date(timeIntervalSinceReferenceDate: savedAt), completion: done)
                    return nil
                }
            },
            removeValue: { key, completion in
                deadline.run(.removal, completion) { done in
                    cache.removeValue(for: key, completion: done)
                    return nil
                }
            },
            removeAll: { completion in
                deadline.run(.removalOfEveryValue, completion) { done in
                    cache.removeAll(completion: done)
                    return nil
                }
            },
            ageLimit: cache.expiry.ageLimit, timeout: timeout)
    }

    /// A level written at once over a cache whose operations are `async` (a database reached through an async
    /// client). Each operation runs in a task of its own, which keeps the task-local values of the code that asked
    /// the store. With a `timeout`, an operation that has not finished by then is cancelled and ends with
    /// ``LevelTimeoutError`` (within a quarter of `timeout` after it, as `scheduler` tells time): a read counts as a
    /// miss (the store reads the next level, or fetches), a write or removal is told to the store's `onWriteFailure`,
    /// and the store keeps the value as it keeps any value no level could save. A read that fails counts as a miss
    /// too. A test gives a `TestScheduler` and moves its time.
    ///
    /// ```swift
    /// let store = Store(
    ///     levels: [.cache(MemoryCache(), name: "memory"), .cache(table, name: "table", timeout: .milliseconds(200))],
    ///     fetch: LoaderFamily { (id: String) in api.quote(id) })
    /// ```
    public static func cache(
        _ cache: some AsyncKeyedCache<Key, Value>, name: String, timeout: Duration? = nil,
        scheduler: some Scheduler = .global()
    ) -> StoreLevel {
        let deadline = LevelDeadline(level: name, interval: timeout, scheduler: scheduler)
        return StoreLevel(
            name: name,
            read: { key, completion in
                deadline.run(.read, completion) { done in
                    inTask(done) {
                        guard let cached = try await cache.value(for: key) else { throw CacheMiss.absent }
                        return cached
                    }
                }
            },
            save: { value, savedAt, key, completion in
                deadline.run(.save, completion) { done in
                    inTask(done) {
                        try await cache.save(value, for: key, savedAt: Date(timeIntervalSinceReferenceDate: savedAt))
                    }
                }
            },
            removeValue: { key, completion in
                deadline.run(.removal, completion) { done in inTask(done) { try await cache.removeValue(for: key) } }
            },
            removeAll: { completion in
                deadline.run(.removalOfEveryValue, completion) { done in inTask(done) { try await cache.removeAll() } }
            }, timeout: timeout)
    }

    /// A level made of its operations, written at once unless `writeDebounce` says. Its writes as the store's core
    /// issues them unbox their value and key here, in code that is not specialized: a level made by the library
    /// around another (timed, reporting to events) pays a few run-time type look-ups per write.
    init(
        name: String,
        read: @escaping @Sendable (Key, @escaping Completion<CachedValue<Value>>) -> (@Sendable () -> Void)?,
        save: @escaping @Sendable (Value, Double, Key, @escaping Completion<Void>) -> Void,
        removeValue: @escaping @Sendable (Key, @escaping Completion<Void>) -> Void,
        removeAll: @escaping @Sendable (@escaping Completion<Void>) -> Void,
        writeDebounce: Duration? = nil,
        scheduler: any Scheduler = ImmediateScheduler(),
        ageLimit: Duration? = nil,
        timeout: Duration? = nil
    ) {
        self.name = name
        boxed = BoxedLevel(
            read: { key, completion in read(StoreKey<Key>.key(of: key)) { completion($0.map { $0.boxed }) } },
            save: { box, savedAt, key, completion in
                save((box as! ValueBox<Value>).value, savedAt, StoreKey<Key>.key(of: key), completion)
            },
            removeValue: { key, completion in removeValue(StoreKey<Key>.key(of: key), completion) },
            removeAll: removeAll, writeDebounce: writeDebounce, scheduler: scheduler, ageLimit: ageLimit,
            timeout: timeout)
    }
}

/// Runs `body` in a task (which inherits the caller's task-local values and priority) and hands its result to
/// `completion`; returns what cancels the task.
private func inTask<Output: Sendable>(
    _ completion: @escaping @Sendable (Result<Output, any Error>) -> Void,
    _ body: @escaping @Sendable () async throws -> Output
) -> @Sendable () -> Void {
    let task = Task {
        do {
            completion(.success(try await body()))
        } catch {
            completion(.failure(error))
        }
    }
    return { task.cancel() }
}

/// The time a level's operations are given, and what ends one that takes longer.
///
/// One clock per level, not one timer per operation (a timer costs a thread's wake-up, even cancelled): while
/// operations run, the scheduler looks at their deadlines every quarter of `interval`, so an operation that takes
/// too long ends between `interval` and a quarter more after it started.
private final class LevelDeadline: Sendable {
    private struct Running {
        /// When the operation ends, in the scheduler's time.
        let deadline: Duration
        let expire: @Sendable () -> Void
    }

    private struct State {
        var running: [Int: Running] = [:]
        var nextID = 0
        var isTicking = false
    }

    private let level: String
    private let interval: Duration?
    private let scheduler: any Scheduler
    private let state = Locked(State())

    init(level: String, interval: Duration?, scheduler: any Scheduler) {
        self.level = level
        self.interval = interval
        self.scheduler = scheduler
    }

    /// Starts an operation with `start`, which returns what cancels it (or `nil`); `completion` receives the first of
    /// its answer and, once `interval` passed, a ``LevelTimeoutError`` (then the operation is cancelled). Returns what
    /// cancels the operation.
    @discardableResult
    func run<Output: Sendable>(
        _ operation: LevelOperation,
        _ completion: @escaping @Sendable (Result<Output, any Error>) -> Void,
        start: (@escaping @Sendable (Result<Output, any Error>) -> Void) -> (@Sendable () -> Void)?
    ) -> (@Sendable () -> Void)? {
        guard let interval else { return start(completion) }
        let answer = FirstAnswer(completion)
        let level = level
        let running = Running(deadline: scheduler.now + interval) {
            answer.expire { LevelTimeoutError(level: level, operation: operation, interval: interval, lateEnd: $0) }
        }
        let (id, startsTicking) = state.withLock { state in
            state.nextID += 1
            state.running[state.nextID] = running
            return (state.nextID, !exchange(&state.isTicking, with: true))
        }
        if startsTicking { tick(every: interval / 4) }
        let cancel = start { [self] result in
            answer.give(result)
            _ = state.withLock { $0.running.removeValue(forKey: id) }  // released after unlocking
        }
        answer.keep(cancel)
        return cancel
    }

    /// Ends the operations past their deadline every `period`, until none runs.
    private func tick(every period: Duration) {
        scheduler.schedule(after: period) { [self] in
            let now = scheduler.now
            let (expired, isIdle) = state.withLock { state -> ([Running], Bool) in
                let expired = state.running.filter { $0.value.deadline <= now }
                for id in expired.keys { state.running[id] = nil }
                if state.running.isEmpty { state.isTicking = false }
                return (Array(expired.values), state.running.isEmpty)
            }
            for running in expired { running.expire() }
            if !isIdle { tick(every: period) }
        }
    }
}

/// A completion called once, with the first answer given: the operation's, or a timeout's (which cancels it, and
/// tells the timeout's ``LateEnd`` when the operation answers after all).
private final class FirstAnswer<Output: Sendable>: Sendable {
    private struct State {
        var completion: (@Sendable (Result<Output, any Error>) -> Void)?
        var cancel: (@Sendable () -> Void)?
        var hasExpired = false
        /// Once the timeout answered: the end of the operation, to tell when it comes.
        var lateEnd: LateEnd?
    }
    private let state: Locked<State>

    init(_ completion: @escaping @Sendable (Result<Output, any Error>) -> Void) {
        state = Locked(State(completion: completion))
    }

    /// Calls the completion with `result` if no answer came before; tells the operation's late end otherwise.
    func give(_ result: Result<Output, any Error>) {
        // Taken under the lock, called and released after it: both are the caller's code.
        let (completion, cancel, lateEnd) = state.withLock { state in
            (state.completion.take(), state.cancel.take(), state.lateEnd.take())
        }
        withExtendedLifetime(cancel) { completion?(result) }
        lateEnd?.end()
    }

    /// Ends the operation with the error `timeout` makes of its late end if no answer came before, and cancels it.
    func expire(with timeout: (LateEnd) -> any Error) {
        let lateEnd = LateEnd()
        let (completion, cancel) = state.withLock { state in
            let completion = state.completion.take()
            state.hasExpired = completion != nil
            if completion != nil { state.lateEnd = lateEnd }
            return (completion, state.cancel.take())
        }
        guard let completion else { return }
        cancel?()
        completion(.failure(timeout(lateEnd)))
    }

    /// Keeps what cancels the operation, for a timeout; cancels it now if the timeout came already, drops it if the
    /// answer did.
    func keep(_ cancel: (@Sendable () -> Void)?) {
        let (kept, hasExpired) = state.withLock { state -> (Bool, Bool) in
            guard state.completion != nil else { return (false, state.hasExpired) }
            state.cancel = cancel
            return (true, false)
        }
        if hasExpired { cancel?() } else if !kept { withExtendedLifetime(cancel) {} }
    }
}

/// An operation of a ``StoreLevel``.
public enum LevelOperation: String, Sendable {
    /// A read of a key's value.
    case read
    /// A save of a key's value.
    case save
    /// A removal of a key's value.
    case removal
    /// A removal of every value (a store's clear).
    case removalOfEveryValue = "removal of every value"
}

/// The error of a ``StoreLevel``'s operation that did not finish within the level's timeout.
public struct LevelTimeoutError: Error, Equatable, CustomStringConvertible {
    /// The name of the level.
    public let level: String
    /// The operation that did not finish.
    public let operation: LevelOperation
    /// The time the level's operations are given.
    public let interval: Duration
    /// When the operation really ends (a save under way may still land): `nil` for an error made otherwise.
    let lateEnd: LateEnd?

    /// Creates the error of `level`'s `operation`, which did not finish within `interval`.
    init(level: String, operation: LevelOperation, interval: Duration, lateEnd: LateEnd? = nil) {
        self.level = level
        self.operation = operation
        self.interval = interval
        self.lateEnd = lateEnd
    }

    /// Whether both are timeouts of the same operation of the same level, given the same time.
    public static func == (lhs: LevelTimeoutError, rhs: LevelTimeoutError) -> Bool {
        lhs.level == rhs.level && lhs.operation == rhs.operation && lhs.interval == rhs.interval
    }

    public var description: String {
        "The level “\(level)” did not finish a \(operation.rawValue) within \(interval)."
    }
}

/// The end of an operation a level's timeout gave up on, which may still be under way (a save whose query was sent
/// lands when the database answers it): what waits for it runs once the operation answers, at once if it did.
final class LateEnd: Sendable {
    private let state = Locked<(hasEnded: Bool, waiting: [@Sendable () -> Void])>((false, []))

    /// Runs `action` once the operation ended.
    func whenEnded(_ action: @escaping @Sendable () -> Void) {
        let hasEnded = state.withLock { state in
            if !state.hasEnded { state.waiting.append(action) }
            return state.hasEnded
        }
        if hasEnded { action() }
    }

    /// The operation ended: what waits for it runs.
    func end() {
        let waiting = state.withLock { state in
            state.hasEnded = true
            return exchange(&state.waiting, with: [])
        }
        for action in waiting { action() }
    }
}
