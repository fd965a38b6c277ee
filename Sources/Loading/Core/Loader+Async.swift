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

    /// ``load()``'s bridge, for loaders that have their own ``load()``.
    @inlinable
    func awaitLoad() async throws -> Output {
        if Task.isCancelled { throw CancellationError() }
        let bridge = AsyncLoadBridge<Output>()
        let token = load { bridge.complete(with: $0) }
        // Answered at once: no continuation, no cancellation handler.
        if let answer = bridge.answerIfDone(keeping: token) { return try answer.get() }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { bridge.wait(with: $0) }
        } onCancel: {
            bridge.cancel()
        }
    }
}

/// Joins one load to its caller: its answer when it came before the load returned, else a continuation, whichever
/// of completion and Task cancellation comes first.
@usableFromInline
final class AsyncLoadBridge<Output: Sendable>: Sendable {
    @usableFromInline
    enum State: Sendable {
        /// The load runs; its token, once it returned.
        case loading((any CancellationToken)?)
        /// It answered before anyone waits.
        case answered(Result<Output, any Error>)
        case waiting(UnsafeContinuation<Output, any Error>, (any CancellationToken)?)
        case cancelled
        case finished
    }

    @usableFromInline let state = Locked(State.loading(nil))

    @inlinable
    init() {}

    /// The load's completion.
    @inlinable
    func complete(with result: Result<Output, any Error>) {
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
        guard case .waiting(let continuation, _) = waiting else { return }
        continuation.resume(with: result)
    }

    /// Once the load returned: its answer when it came already; otherwise keeps its token and returns `nil`.
    @inlinable
    func answerIfDone(keeping token: any CancellationToken) -> Result<Output, any Error>? {
        let answer = state.withLock { state -> Result<Output, any Error>? in
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
        return answer
    }

    /// Waits for the answer with `continuation` (at once when it came meanwhile).
    @inlinable
    func wait(with continuation: UnsafeContinuation<Output, any Error>) {
        let resumeWith = state.withLock { state -> Result<Output, any Error>? in
            switch state {
            case .loading(let token):
                state = .waiting(continuation, token)
                return nil
            case .answered(let result):
                state = .finished
                return result
            case .cancelled, .waiting, .finished:
                return .failure(CancellationError())
            }
        }
        if let resumeWith { continuation.resume(with: resumeWith) }
    }

    /// The calling Task was cancelled: the load is cancelled, and the caller gets `CancellationError` at once.
    @inlinable
    func cancel() {
        let (continuation, token) = state.withLock {
            state -> (UnsafeContinuation<Output, any Error>?, (any CancellationToken)?) in
            switch state {
            case .loading(let token):
                state = .cancelled
                return (nil, token)
            case .answered:
                state = .cancelled
                return (nil, nil)
            case .waiting(let continuation, let token):
                state = .cancelled
                return (continuation, token)
            case .cancelled, .finished:
                return (nil, nil)
            }
        }
        token?.cancel()
        continuation?.resume(throwing: CancellationError())
    }
}
