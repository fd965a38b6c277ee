extension EventStream {
    /// Maps each value to a stream and merges the values of all those streams.
    ///
    /// ```swift
    /// let friends = EventStream.task { try await authenticator.authenticate() }
    ///     .flatMap { session in api.friends(session).asStream() }
    /// ```
    /// Finishes when this stream and every inner stream have finished; the first failure is delivered at once and
    /// cancels everything else.
    public func flatMap<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> EventStream<NewOutput, Failure>
    ) -> EventStream<NewOutput, Failure> {
        EventStream<NewOutput, Failure> { observer in
            let serial = SerializedObserver(observer)
            let group = observer.lifetime.makeChild()
            let active = Locked(1)  // the outer stream, plus one per inner stream still running
            let finishOne: @Sendable (SubscriptionLifetime) -> Void = { lifetime in
                guard lifetime.end() else { return }
                let isLast = active.withLock { active -> Bool in
                    active -= 1
                    return active == 0
                }
                if isLast {
                    serial.send(.completion(.finished))
                    group.end()
                }
            }
            let fail: @Sendable (Failure) -> Void = { error in
                serial.send(.completion(.failure(error)))
                group.end()
            }
            let outer = group.makeChild()
            subscribe(
                StreamObserver(lifetime: outer) { event in
                    switch event {
                    case .value(let value):
                        guard group.isActive else { return }
                        active.withLock { $0 += 1 }
                        let inner = group.makeChild()
                        transform(value).subscribe(
                            StreamObserver(lifetime: inner) { event in
                                switch event {
                                case .value: serial.send(event)
                                case .completion(.finished): finishOne(inner)
                                case .completion(.failure(let error)): fail(error)
                                }
                            })
                    case .completion(.finished):
                        finishOne(outer)
                    case .completion(.failure(let error)):
                        fail(error)
                    }
                })
        }
    }
}
