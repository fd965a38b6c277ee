/// The error of a stream used as a loader (``EventStream/asLoader()``) that finished without sending a value.
public struct StreamFinishedWithoutValueError: Error, Equatable, CustomStringConvertible {
    /// Creates the error.
    public init() {}

    public var description: String { "The stream finished without sending a value." }
}

extension EventStream {
    /// This stream as a loader of its first value: each load subscribes, delivers the first value and cancels the
    /// subscription; a failure is delivered as the load's error, and finishing without a value as
    /// ``StreamFinishedWithoutValueError``.
    ///
    /// ```swift
    /// let latest = ResourceModel(loader: liveFriends.asLoader())  // each load takes the stream's first value
    /// ```
    public func asLoader() -> StreamLoader<Output, Failure> {
        StreamLoader(stream: self)
    }
}

/// A loader of a stream's first value. See ``EventStream/asLoader()``.
public struct StreamLoader<Output: Sendable, Failure: Error>: Loader {
    let stream: EventStream<Output, Failure>

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        let subscription = stream.first().sink { streamCompletion in
            switch streamCompletion {
            case .finished: pending.complete(.failure(StreamFinishedWithoutValueError()))
            case .failure(let error): pending.complete(.failure(error))
            }
        } receiveValue: { value in
            pending.complete(.success(value))
        }
        pending.startStep { subscription }
        if pending.isFinished { subscription.cancel() }
        return pending
    }
}
