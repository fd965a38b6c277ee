extension Loader {
    /// Loads with the loader `transform` makes from this loader's value: "authenticate, then fetch".
    ///
    /// ```swift
    /// let friends = session.flatMap { token in api.friends(authorizedBy: token) }
    /// ```
    /// Fails with this loader's error without calling `transform`, or with the second loader's error. Cancelling
    /// cancels whichever load is in flight, and once this one is cancelled the second never starts.
    public func flatMap<Next: Loader>(
        _ transform: @escaping @Sendable (Output) -> Next
    ) -> FlatMapLoader<Self, Next> {
        FlatMapLoader(upstream: self, transform: transform)
    }
}

/// A loader that loads with a second loader made from its upstream's value. See ``Loader/flatMap(_:)``.
///
/// Delivers on the thread the second load completes on (or the upstream's, when it fails).
public final class FlatMapLoader<Upstream: Loader, Next: Loader>: Loader {
    let upstream: Upstream
    let transform: @Sendable (Upstream.Output) -> Next

    init(upstream: Upstream, transform: @escaping @Sendable (Upstream.Output) -> Next) {
        self.upstream = upstream
        self.transform = transform
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Next.Output>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        pending.startFirstStep {
            upstream.load { [transform] result in
                switch result {
                case .success(let value):
                    guard !pending.isFinished else { return }
                    let next = transform(value)
                    pending.startStep { next.load { pending.complete($0) } }
                case .failure(let error):
                    pending.complete(.failure(error))
                }
            }
        }
        return pending
    }
}
