/// A type-erased loader: wraps any ``Loader``, a callback-style closure, or an `async` closure.
///
/// ```swift
/// let fromCallback = AnyLoader<[Friend]> { completion in
///     api.fetchFriends(completion: completion)
///     return AnyCancellationToken {}
/// }
/// let fromAsync = AnyLoader { try await api.friends() }
/// ```
/// To store a chain of composites without naming its type, wrap it in `AnyLoader` (or call
/// ``Loader/eraseToAnyLoader()``), or hold it as `any Loader<Output>`: either way its loads run the code compiled
/// where the chain was built, for its types.
public struct AnyLoader<Output: Sendable>: Loader {
    /// What a load runs.
    @usableFromInline
    enum Body: Sendable {
        /// Starts the work, given the load's completion.
        case start(@Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken)
        /// Answers at once when it can, else says how to start (a store's read of a value it holds). A completion
        /// passed through a stored closure is converted to a general form, which allocates; an answer given at once
        /// needs no conversion, and an awaited one no continuation.
        case answerOrStart(@Sendable () -> Attempt)
    }

    /// An ``Body/answerOrStart(_:)`` loader's answer, or how to start its work.
    @usableFromInline
    enum Attempt {
        case answered(Result<Output, any Error>)
        case start(@Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken)
    }

    @usableFromInline
    let body: Body

    /// Wraps `loader`, hiding its concrete type.
    @inlinable
    public init<Wrapped: Loader>(_ loader: Wrapped) where Wrapped.Output == Output {
        if let erased = loader as? AnyLoader<Output> {
            self = erased
        } else {
            body = .start { loader.load(completion: $0) }
        }
    }

    /// Creates a loader from a callback-style closure that starts the work and returns a token cancelling it.
    ///
    /// The loader keeps the contract even if `load` does not: its completion is called at most once, and never
    /// after the returned token is cancelled.
    @inlinable
    public init(_ load: @escaping @Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken) {
        body = .start { completion in
            let pending = PendingLoad(completion)
            pending.startFirstStep { load { pending.complete($0) } }
            return pending
        }
    }

    /// Creates a loader that calls `attempt` first for each load: an answer it gives completes the load at once;
    /// otherwise the load runs the closure it returned, which keeps the loader contract itself.
    @inlinable
    init(answeringFirst attempt: @escaping @Sendable () -> Attempt) {
        body = .answerOrStart(attempt)
    }

    /// Creates a loader that runs `operation` in a new `Task` for each load; cancelling the load cancels the Task.
    ///
    /// A Task cancelled this way never completes the load, whatever `operation` returns or throws afterwards.
    public init(priority: TaskPriority? = nil, _ operation: @escaping @Sendable () async throws -> Output) {
        body = .start { completion in
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
        switch body {
        case .start(let start):
            return start(completion)
        case .answerOrStart(let attempt):
            switch attempt() {
            case .answered(let result):
                completion(result)
                return FinishedToken()
            case .start(let start):
                return start(completion)
            }
        }
    }

    /// Loads the value with async/await, as ``Loader/load()`` does; an answer the loader has at once is returned
    /// without starting a load.
    @inlinable
    public func load() async throws -> Output {
        guard case .answerOrStart(let attempt) = body else { return try await awaitLoad() }
        if Task.isCancelled { throw CancellationError() }
        switch attempt() {
        case .answered(let result):
            return try result.get()
        case .start(let start):
            return try await AnyLoader(.start(start)).awaitLoad()
        }
    }

    @inlinable
    init(_ body: Body) {
        self.body = body
    }
}

extension Loader {
    /// Wraps this loader in an ``AnyLoader``, hiding its concrete type.
    @inlinable
    public func eraseToAnyLoader() -> AnyLoader<Output> {
        AnyLoader(self)
    }
}
