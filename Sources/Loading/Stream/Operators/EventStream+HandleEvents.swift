extension EventStream {
    /// Calls the given closures as events pass, without changing them: the hook for caching, logging and metrics.
    ///
    /// ```swift
    /// let saved = remote.handleEvents(receiveOutput: { friends in database.save(friends) { _ in } })
    /// ```
    /// Each closure runs before the downstream sees the event, on the thread of the event.
    /// `receiveSubscription` runs when a subscription starts; `receiveCancel` runs only when the subscription is
    /// cancelled before its terminal event.
    @inlinable
    public func handleEvents(
        receiveSubscription: (@Sendable () -> Void)? = nil,
        receiveOutput: (@Sendable (Output) -> Void)? = nil,
        receiveCompletion: (@Sendable (StreamCompletion<Failure>) -> Void)? = nil,
        receiveCancel: (@Sendable () -> Void)? = nil
    ) -> EventStream {
        EventStream { observer in
            receiveSubscription?()
            let lifetime = observer.lifetime
            let sawCompletion = receiveCancel.map { _ in Locked(false) }
            if let receiveCancel, let sawCompletion {
                lifetime.onEnd {
                    if !sawCompletion.withLock({ $0 }) { receiveCancel() }
                }
            }
            subscribe(
                observer.with { event in
                    guard lifetime.isActive else { return }
                    switch event {
                    case .value(let value):
                        receiveOutput?(value)
                    case .completion(let completion):
                        sawCompletion?.withLock { $0 = true }
                        receiveCompletion?(completion)
                    }
                    observer.receive(event)
                })
        }
    }

}
