extension EventStream {
    /// Transforms each value with a throwing closure; a thrown error fails the stream and cancels the upstream.
    ///
    /// ```swift
    /// let pages = responses.tryMap { try JSONDecoder().decode(Page.self, from: $0) }
    /// ```
    @inlinable
    public func tryMap<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) throws -> NewOutput
    ) -> EventStream<NewOutput, any Error> {
        EventStream<NewOutput, any Error> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value):
                        do {
                            observer.receive(.value(try transform(value)))
                        } catch {
                            observer.receive(.completion(.failure(error)))
                            observer.lifetime.end()
                        }
                    case .completion(.finished):
                        observer.receive(.completion(.finished))
                    case .completion(.failure(let error)):
                        observer.receive(.completion(.failure(error)))
                    }
                })
        }
    }
}
