extension EventStream {
    /// Sends a running result: `nextPartialResult(previous, value)` for each value, starting from `initialResult`.
    ///
    /// ```swift
    /// updates.scan(loadedFriends) { friends, update in friends.applying(update) }
    /// ```
    public func scan<Result: Sendable>(
        _ initialResult: Result,
        _ nextPartialResult: @escaping @Sendable (Result, Output) -> Result
    ) -> EventStream<Result, Failure> {
        EventStream<Result, Failure> { observer in
            let accumulator = Locked(initialResult)
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value):
                        let next = accumulator.withLock { accumulated -> Result in
                            accumulated = nextPartialResult(accumulated, value)
                            return accumulated
                        }
                        observer.receive(.value(next))
                    case .completion(let completion):
                        observer.receive(.completion(completion))
                    }
                })
        }
    }
}
