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
    @usableFromInline let specializedLoad: SpecializedLoad<MapErrorLoader<Upstream>>

    @inlinable
    init(upstream: Upstream, transform: @escaping @Sendable (any Error) -> any Error) {
        self.upstream = upstream
        self.transform = transform
        specializedLoad = SpecializedLoad { loader, completion in loader.directLoad(completion: completion) }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        // In its generic form (a call through `any Loader`), hand the load to the copy specialized where this
        // composite was built.
        guard _isConcrete(Upstream.self) else { return specializedLoad.run(self, completion) }
        return directLoad(completion: completion)
    }

    /// The load itself.
    @inlinable
    func directLoad(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        let transform = self.transform
        return upstream.load { completion($0.mapError(transform)) }
    }
}
