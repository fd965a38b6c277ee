extension EventStream {
    /// Subscribes with closures that run on the main actor: the way a `@MainActor` view model or view controller
    /// observes a stream, calling its own methods directly.
    ///
    /// ```swift
    /// @MainActor final class FriendsScreen {
    ///     var subscription: StreamSubscription?
    ///     func bind(to states: EventStream<LoadingState<[String]>, Never>) {
    ///         subscription = states.sink(on: .main) { [weak self] state in self?.render(state) }
    ///     }
    ///     func render(_ state: LoadingState<[String]>) {}
    /// }
    /// ```
    /// Events hop to the main queue (inline when they already arrive on it with nothing queued ahead), which is the
    /// main actor's executor. Keep the returned subscription: it cancels when it is deallocated.
    public func sink(
        on scheduler: MainQueueScheduler,
        receiveCompletion: @escaping @MainActor @Sendable (StreamCompletion<Failure>) -> Void = { _ in },
        receiveValue: @escaping @MainActor @Sendable (Output) -> Void
    ) -> StreamSubscription {
        receive(on: scheduler).sink { completion in
            MainActor.assumeIsolated { receiveCompletion(completion) }
        } receiveValue: { value in
            MainActor.assumeIsolated { receiveValue(value) }
        }
    }
}
