extension EventStream {
    /// Sends a running result: `nextPartialResult(previous, value)` for each value, starting from `initialResult`.
    ///
    /// ```swift
    /// let lists = updates.scan(loadedFriends) { friends, update in friends.applying(update) }
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
                        // Events never overlap, so reading, computing outside the lock and storing loses nothing;
                        // `nextPartialResult` and the release of the previous result run unlocked.
                        let next = nextPartialResult(accumulator.withLock { $0 }, value)
                        let replaced = accumulator.withLock { exchange(&$0, with: next) }
                        withExtendedLifetime(replaced) {}
                        observer.receive(.value(next))
                    case .completion(let completion):
                        observer.receive(.completion(completion))
                    }
                })
        }
    }
}
