extension Loader {
    /// Loads the value with async/await.
    ///
    /// ```swift
    /// let friends = try await friendsLoader.load()
    /// ```
    /// Cancelling the calling Task cancels the load, and this method then throws `CancellationError` at once
    /// (whatever the load would have delivered).
    public func load() async throws -> Output {
        let bridge = AsyncLoadBridge<Output>()
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                bridge.start(continuation) { self.load(completion: $0) }
            }
        } onCancel: {
            bridge.cancel()
        }
    }
}

/// Joins one load to one continuation, whichever of completion and Task cancellation comes first.
private final class AsyncLoadBridge<Output: Sendable>: Sendable {
    private enum State: Sendable {
        case idle
        case running(UnsafeContinuation<Output, any Error>, (any CancellationToken)?)
        case cancelled
        case finished
    }

    private let state = Locked(State.idle)

    func start(
        _ continuation: UnsafeContinuation<Output, any Error>,
        load: (@escaping LoadCompletion<Output>) -> any CancellationToken
    ) {
        let isCancelled = state.withLock { state -> Bool in
            guard case .idle = state else { return true }
            state = .running(continuation, nil)
            return false
        }
        if isCancelled { return continuation.resume(throwing: CancellationError()) }
        let token = load { [self] result in
            let running = state.withLock { state -> State? in
                guard case .running = state else { return nil }
                return exchange(&state, with: .finished)
            }
            // The load's token is released here, after unlocking, with the rest of the running state.
            guard case .running(let continuation, _) = running else { return }
            continuation.resume(with: result)
        }
        let cancelNow = state.withLock { state -> Bool in
            switch state {
            case .running(let continuation, nil):
                state = .running(continuation, token)
                return false
            case .cancelled:
                return true
            default:
                return false
            }
        }
        if cancelNow { token.cancel() }
    }

    func cancel() {
        let (continuation, token) = state.withLock {
            state -> (UnsafeContinuation<Output, any Error>?, (any CancellationToken)?) in
            switch state {
            case .idle:
                state = .cancelled
                return (nil, nil)
            case .running(let continuation, let token):
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
