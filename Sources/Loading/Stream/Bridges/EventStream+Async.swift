extension EventStream {
    /// The stream's values as an async sequence: iterating subscribes, a failure is thrown, and cancelling the
    /// iterating Task (or leaving the loop) cancels the subscription.
    ///
    /// ```swift
    /// for try await list in composer.friendsStream().values {
    ///     render(list)
    /// }
    /// ```
    /// Values are buffered without limit while the loop is busy. (Streams that cannot fail get a non-throwing
    /// `values`; this overload is disfavoured so that one wins.)
    @_disfavoredOverload
    public var values: AsyncThrowingStream<Output, any Error> {
        AsyncThrowingStream { continuation in
            let subscription = sink { completion in
                switch completion {
                case .finished: continuation.finish()
                case .failure(let error): continuation.finish(throwing: error)
                }
            } receiveValue: { value in
                continuation.yield(value)
            }
            continuation.onTermination = { _ in subscription.cancel() }
        }
    }

    /// The stream's first value, awaited; cancelling the Task cancels the subscription and throws
    /// `CancellationError`. Throws ``StreamFinishedWithoutValueError`` when the stream finishes without a value.
    ///
    /// ```swift
    /// let session = try await EventStream.task { try await auth.signIn() }.value
    /// ```
    public var value: Output {
        get async throws {
            try await asLoader().load()
        }
    }
}

extension EventStream where Failure == Never {
    /// The values of a stream that cannot fail, as an async sequence that cannot throw.
    public var values: AsyncStream<Output> {
        AsyncStream { continuation in
            let subscription = sink { _ in
                continuation.finish()
            } receiveValue: { value in
                continuation.yield(value)
            }
            continuation.onTermination = { _ in subscription.cancel() }
        }
    }
}
