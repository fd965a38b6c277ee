/// A type-erased loader: wraps any ``Loader``, a callback-style closure, or an `async` closure.
///
/// ```swift
/// let fromCallback = AnyLoader<[Friend]> { completion in
///     api.fetchFriends(completion: completion)
///     return AnyCancellationToken()
/// }
/// let fromAsync = AnyLoader { try await api.friends() }
/// ```
public struct AnyLoader<Output: Sendable>: Loader {
    @usableFromInline
    let body: @Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken

    /// Wraps `loader`, hiding its concrete type.
    @inlinable
    public init<Wrapped: Loader>(_ loader: Wrapped) where Wrapped.Output == Output {
        if let erased = loader as? AnyLoader<Output> {
            self = erased
        } else {
            body = { loader.load(completion: $0) }
        }
    }

    /// Creates a loader from a callback-style closure that starts the work and returns a token cancelling it.
    ///
    /// The loader keeps the contract even if `load` does not: its completion is called at most once, and never
    /// after the returned token is cancelled.
    @inlinable
    public init(_ load: @escaping @Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken) {
        body = { completion in
            let pending = PendingLoad(completion)
            pending.startFirstStep { load { pending.complete($0) } }
            return pending
        }
    }

    /// Creates a loader that runs `operation` in a new `Task` for each load; cancelling the load cancels the Task.
    ///
    /// A Task cancelled this way never completes the load, whatever `operation` returns or throws afterwards.
    public init(priority: TaskPriority? = nil, _ operation: @escaping @Sendable () async throws -> Output) {
        body = { completion in
            let pending = PendingLoad(completion)
            pending.startFirstStep {
                let task = Task(priority: priority) {
                    do {
                        pending.complete(.success(try await operation()))
                    } catch {
                        pending.complete(.failure(error))
                    }
                }
                return AnyCancellationToken { task.cancel() }
            }
            return pending
        }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        body(completion)
    }
}

extension Loader {
    /// Wraps this loader in an ``AnyLoader``, hiding its concrete type.
    @inlinable
    public func eraseToAnyLoader() -> AnyLoader<Output> {
        AnyLoader(self)
    }
}
