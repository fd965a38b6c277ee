extension Loader {
    /// Loads the value with async/await.
    ///
    /// ```swift
    /// let friends = try await friendsLoader.load()
    /// ```
    /// Cancelling the calling Task cancels the load, and this method then throws `CancellationError` at once
    /// (whatever the load would have delivered). A load that answers before it returns (a cache hit) is returned
    /// without suspending.
    @inlinable
    public func load() async throws -> Output {
        try await awaitLoad()
    }

    /// ``load()``'s bridge, for loaders that have their own ``load()``: compiled once, not specialized. An
    /// ``AnyLoader`` that answers at once (a store's read of a value it holds) returns without it.
    @usableFromInline
    func awaitLoad() async throws -> Output {
        if Task.isCancelled { throw CancellationError() }
        let bridge = AsyncLoadBridge<Output>()
        return try await bridge.awaitAnswer(cancelling: load { bridge.complete(with: $0) })
    }
}

/// Joins one load to its caller: its answer when it came before the load returned, else a continuation, whichever
/// of completion and Task cancellation comes first. A face over a core that is not generic: only what touches the
/// output's type (the answer and the continuation) is generic, and both are compiled once, here (an awaited load that
/// did not answer at once has suspended its task, which costs far more than their run-time generic code).
package struct AsyncLoadBridge<Output: Sendable>: Sendable {
    let core = AsyncLoadCore()

    package init() {}

    /// The load's completion.
    package func complete(with result: Result<Output, any Error>) {
        guard let waiting = core.answer(result) else { return }
        (waiting as! UnsafeContinuation<Output, any Error>).resume(with: result)  // kept by `wait(with:)`
    }

    /// Once the load returned: its answer when it came already; otherwise keeps its token and returns `nil`.
    func answerIfDone(keeping token: any CancellationToken) -> Result<Output, any Error>? {
        core.answerIfDone(keeping: token).map { $0 as! Result<Output, any Error> }  // kept by `complete(with:)`
    }

    /// Waits for the answer with `continuation` (at once when it came meanwhile).
    func wait(with continuation: UnsafeContinuation<Output, any Error>) {
        switch core.wait(with: continuation) {
        case .waits: break
        case .answered(let answer): continuation.resume(with: answer as! Result<Output, any Error>)
        case .cancelled: continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits for the answer of the operation started already (`token` cancels it): at once, with no continuation and
    /// no cancellation handler, when it came before. Cancelling the calling Task cancels `token`, and throws
    /// `CancellationError` at once.
    package func awaitAnswer(cancelling token: any CancellationToken) async throws -> Output {
        if let answer = answerIfDone(keeping: token) { return try answer.get() }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { wait(with: $0) }
        } onCancel: {
            cancel()
        }
    }

    /// The calling Task was cancelled: the load is cancelled, and the caller gets `CancellationError` at once.
    func cancel() {
        guard let waiting = core.cancel() else { return }
        (waiting as! UnsafeContinuation<Output, any Error>).resume(throwing: CancellationError())
    }
}

/// The state of an awaited load, its answer and continuation kept as values of types only ``AsyncLoadBridge``
/// knows: compiled once for every output type.
struct AsyncLoadCore: Sendable {
    private enum State: Sendable {
        /// The load runs; its token, once it returned.
        case loading((any CancellationToken)?)
        /// It answered before anyone waits (a `Result` of the face's output).
        case answered(any Sendable)
        /// A continuation of the face's output waits.
        case waiting(any Sendable, (any CancellationToken)?)
        case cancelled
        case finished
    }

    private let state = Locked(State.loading(nil))

    init() {}

    /// Keeps `result` for the caller not waiting yet, or returns the continuation to resume with it.
    func answer(_ result: any Sendable) -> (any Sendable)? {
        let waiting = state.withLock { state -> State? in
            switch state {
            case .loading:
                state = .answered(result)
                return nil
            case .waiting:
                return exchange(&state, with: .finished)
            case .answered, .cancelled, .finished:
                return nil
            }
        }
        // The load's token is released here, after unlocking, with the rest of the waiting state.
        guard case .waiting(let continuation, _) = waiting else { return nil }
        return continuation
    }

    /// Once the load returned: its answer when it came already; otherwise keeps its token and returns `nil`.
    func answerIfDone(keeping token: any CancellationToken) -> (any Sendable)? {
        state.withLock { state -> (any Sendable)? in
            switch state {
            case .answered(let result):
                state = .finished
                return result
            case .loading:
                state = .loading(token)
                return nil
            case .waiting, .cancelled, .finished:
                return nil
            }
        }
    }

    /// What a caller that comes to wait does.
    enum Wait {
        /// Its continuation is kept until the answer comes.
        case waits
        /// The answer came meanwhile: the caller resumes with it at once.
        case answered(any Sendable)
        /// The caller was cancelled meanwhile.
        case cancelled
    }

    /// Keeps `continuation` until the answer comes, unless the answer or a cancel came first.
    func wait(with continuation: any Sendable) -> Wait {
        state.withLock { state -> Wait in
            switch state {
            case .loading(let token):
                state = .waiting(continuation, token)
                return .waits
            case .answered(let result):
                state = .finished
                return .answered(result)
            case .cancelled, .waiting, .finished:
                return .cancelled
            }
        }
    }

    /// Cancels the load; returns the continuation waiting, to resume with `CancellationError`.
    func cancel() -> (any Sendable)? {
        // What the state held (an answer, a token) is released after unlocking.
        let previous = state.withLock { state -> State in
            switch state {
            case .loading, .answered, .waiting: exchange(&state, with: .cancelled)
            case .cancelled, .finished: .finished
            }
        }
        switch previous {
        case .loading(let token):
            token?.cancel()
            return nil
        case .waiting(let continuation, let token):
            token?.cancel()
            return continuation
        case .answered, .cancelled, .finished:
            return nil
        }
    }
}
