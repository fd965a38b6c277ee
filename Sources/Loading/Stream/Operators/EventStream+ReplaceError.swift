extension EventStream {
    /// Replaces a failure with `value`, then finishes: a stream that cannot fail.
    ///
    /// ```swift
    /// let lists = friends.replaceError(with: [])
    /// ```
    @inlinable
    public func replaceError(with value: Output) -> EventStream<Output, Never> {
        EventStream<Output, Never> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value): observer.receive(.value(value))
                    case .completion(.finished): observer.receive(.completion(.finished))
                    case .completion(.failure):
                        observer.receive(.value(value))
                        observer.receive(.completion(.finished))
                    }
                })
        }
    }
}
