extension EventStream {
    /// Transforms each value and sends only the non-`nil` results.
    ///
    /// ```swift
    /// let upserted = events.compactMap { $0.upsertedFriend }
    /// ```
    @inlinable
    public func compactMap<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> NewOutput?
    ) -> EventStream<NewOutput, Failure> {
        EventStream<NewOutput, Failure> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value):
                        if let transformed = transform(value) { observer.receive(.value(transformed)) }
                    case .completion(let completion):
                        observer.receive(.completion(completion))
                    }
                })
        }
    }
}
