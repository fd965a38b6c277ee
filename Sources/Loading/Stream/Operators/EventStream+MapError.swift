extension EventStream {
    /// Transforms the failure's error.
    ///
    /// ```swift
    /// let typed = api.friends().asStream().mapError { FriendsError.network($0) }
    /// ```
    @inlinable
    public func mapError<NewFailure: Error>(
        _ transform: @escaping @Sendable (Failure) -> NewFailure
    ) -> EventStream<Output, NewFailure> {
        EventStream<Output, NewFailure> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value): observer.receive(.value(value))
                    case .completion(.finished): observer.receive(.completion(.finished))
                    case .completion(.failure(let error)): observer.receive(.completion(.failure(transform(error))))
                    }
                })
        }
    }

    /// The same stream with its failure seen as `any Error`.
    func eraseErrorType() -> EventStream<Output, any Error> {
        mapError { $0 }
    }
}

extension EventStream where Failure == Never {
    /// The same stream, typed as able to fail with `NewFailure` (it never does), to combine it with one that can.
    @inlinable
    public func setFailureType<NewFailure: Error>(to _: NewFailure.Type) -> EventStream<Output, NewFailure> {
        EventStream<Output, NewFailure> { observer in
            subscribe(
                observer.with { event in
                    switch event {
                    case .value(let value): observer.receive(.value(value))
                    case .completion: observer.receive(.completion(.finished))
                    }
                })
        }
    }
}
