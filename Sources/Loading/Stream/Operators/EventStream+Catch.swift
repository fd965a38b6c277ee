extension EventStream {
    /// Switches to the stream `handler` returns when this one fails; values before the failure pass through.
    ///
    /// ```swift
    /// let friends = memory.asStream().catch { _ in database.asStream() }
    /// ```
    /// Cancelling before the failure cancels this stream; after it, the replacement.
    @inlinable
    public func `catch`<NewFailure: Error>(
        _ handler: @escaping @Sendable (Failure) -> EventStream<Output, NewFailure>
    ) -> EventStream<Output, NewFailure> {
        EventStream<Output, NewFailure> { observer in
            let upstream = observer.lifetime.makeChild()
            subscribe(
                StreamObserver(lifetime: upstream) { event in
                    switch event {
                    case .value(let value):
                        observer.receive(.value(value))
                    case .completion(.finished):
                        guard upstream.end() else { return }
                        observer.receive(.completion(.finished))
                    case .completion(.failure(let error)):
                        guard upstream.end(), observer.lifetime.isActive else { return }
                        handler(error).subscribe(observer)
                    }
                })
        }
    }
}
