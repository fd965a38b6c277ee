extension EventStream {
    /// Subscribes, calling `receiveValue` for each value and `receiveCompletion` for the terminal event.
    ///
    /// ```swift
    /// friends.sink { completion in
    ///     if case .failure(let error) = completion { show(error) }
    /// } receiveValue: { list in
    ///     show(list)
    /// }
    /// .store(in: &subscriptions)
    /// ```
    /// Keep the returned subscription: it cancels when it is deallocated.
    @inlinable
    public func sink(
        receiveCompletion: @escaping @Sendable (StreamCompletion<Failure>) -> Void,
        receiveValue: @escaping @Sendable (Output) -> Void
    ) -> StreamSubscription {
        let lifetime = SubscriptionLifetime()
        subscribe(
            StreamObserver(lifetime: lifetime) { event in
                switch event {
                case .value(let value):
                    guard lifetime.isActive else { return }
                    receiveValue(value)
                case .completion(let completion):
                    guard lifetime.end() else { return }
                    receiveCompletion(completion)
                }
            })
        return StreamSubscription(lifetime)
    }
}

extension EventStream where Failure == Never {
    /// Subscribes, calling `receiveValue` for each value of a stream that cannot fail.
    ///
    /// ```swift
    /// let subscription = subject.stream.sink { print($0) }
    /// ```
    @inlinable
    public func sink(receiveValue: @escaping @Sendable (Output) -> Void) -> StreamSubscription {
        sink(receiveCompletion: { _ in }, receiveValue: receiveValue)
    }
}

/// A subscription to a stream: cancel it to stop receiving events. It cancels itself when deallocated, so keep it
/// (for example in a `Set<StreamSubscription>`) for as long as you want the events.
public final class StreamSubscription: CancellationToken, Hashable {
    private let lifetime: SubscriptionLifetime

    @usableFromInline
    init(_ lifetime: SubscriptionLifetime) {
        self.lifetime = lifetime
    }

    deinit {
        lifetime.end()
    }

    /// Stops the subscription: once this returns, no further event is delivered.
    public func cancel() {
        lifetime.end()
    }

    /// Whether the subscription is still receiving events (it has neither been cancelled nor completed).
    var isActive: Bool {
        lifetime.isActive
    }

    /// Keeps this subscription in `set`.
    public func store(in set: inout Set<StreamSubscription>) {
        set.insert(self)
    }

    public static func == (lhs: StreamSubscription, rhs: StreamSubscription) -> Bool {
        lhs === rhs
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
