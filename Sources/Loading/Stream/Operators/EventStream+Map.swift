extension EventStream {
    /// Transforms each value.
    ///
    /// ```swift
    /// let rows = friends.map { $0.map(FriendRow.init) }
    /// ```
    @inlinable
    public func map<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> NewOutput
    ) -> EventStream<NewOutput, Failure> {
        EventStream<NewOutput, Failure> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value): observer.receive(.value(transform(value)))
                    case .completion(let completion): observer.receive(.completion(completion))
                    }
                })
        }
    }
}
