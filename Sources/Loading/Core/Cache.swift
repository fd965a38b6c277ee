/// Somewhere a loaded value can be saved: a memory store, a database.
///
/// `save(_:completion:)` calls `completion` exactly once, with `.success` when the value is stored and with
/// `.failure` when it is not; a failed save must leave what was stored before intact. `LoadingTestSupport` ships
/// `CacheContract`, the same rules as checks that any implementation's tests can run.
public protocol Cache<Value>: Sendable {
    /// The type of the stored value.
    associatedtype Value: Sendable

    /// Saves `value`, replacing what was stored, and reports the outcome.
    func save(_ value: Value, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
}

extension Cache {
    /// Saves `value`, as ``save(_:completion:)`` does, and returns once it is stored; throws the cache's error when it
    /// is not. A save is not cancelled: cancelling the task ends the wait at once, with `CancellationError`.
    public func save(_ value: Value) async throws {
        try await AnyLoader<Void> { completion in
            self.save(value, completion: completion)
            return AnyCancellationToken {}
        }.load()
    }
}

/// A cache made of an `async` closure (an actor's method, a database call).
public struct AnyCache<Value: Sendable>: Cache {
    private let body: @Sendable (Value, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void

    /// Wraps `cache`, hiding its concrete type.
    init<Wrapped: Cache>(_ cache: Wrapped) where Wrapped.Value == Value {
        body = { cache.save($0, completion: $1) }
    }

    /// Creates a cache from a closure that saves a value and reports the outcome.
    init(_ save: @escaping @Sendable (Value, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void) {
        body = save
    }

    /// Creates a cache from an `async` closure, such as an actor's method. Saves run one after another, in the
    /// order they were asked for, each in a `Task`.
    ///
    /// ```swift
    /// let store = QuoteStore()  // an actor with `func save(_ quotes: [String])`
    /// let cache = AnyCache<[String]> { quotes in await store.save(quotes) }
    /// ```
    public init(_ save: @escaping @Sendable (Value) async throws -> Void) {
        let last = Locked<Task<Void, Never>?>(nil)
        body = { value, completion in
            last.withLock { last in
                let previous = last
                last = Task {
                    await previous?.value  // keeps saves in the order they were asked for
                    do {
                        try await save(value)
                        completion(.success(()))
                    } catch {
                        completion(.failure(error))
                    }
                }
            }
        }
    }

    public func save(_ value: Value, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        body(value, completion)
    }
}
