extension Loader {
    /// Transforms each failure's error, for example into a domain error type.
    ///
    /// ```swift
    /// let typed = remote.mapError { FriendsError.unavailable(underlying: $0) }
    /// ```
    @inlinable
    public func mapError(_ transform: @escaping @Sendable (any Error) -> any Error) -> MapErrorLoader<Self> {
        MapErrorLoader(upstream: self, transform: transform)
    }
}

/// A loader that transforms its upstream's error. See ``Loader/mapError(_:)``.
public struct MapErrorLoader<Upstream: Loader>: Loader {
    @usableFromInline let upstream: Upstream
    @usableFromInline let transform: @Sendable (any Error) -> any Error

    @inlinable
    init(upstream: Upstream, transform: @escaping @Sendable (any Error) -> any Error) {
        self.upstream = upstream
        self.transform = transform
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        let transform = self.transform
        return upstream.load { completion($0.mapError(transform)) }
    }
}
