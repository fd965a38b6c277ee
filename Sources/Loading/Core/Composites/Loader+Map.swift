extension Loader {
    /// Transforms each loaded value.
    ///
    /// ```swift
    /// let names = friends.map { $0.map(\.name) }
    /// ```
    /// Runs `transform` on the thread the upstream delivers on; cancelling cancels the upstream load.
    @inlinable
    public func map<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> NewOutput
    ) -> MapLoader<Self, NewOutput> {
        MapLoader(upstream: self, transform: transform)
    }
}

/// A loader that transforms its upstream's value. See ``Loader/map(_:)``.
public struct MapLoader<Upstream: Loader, Output: Sendable>: Loader {
    @usableFromInline let upstream: Upstream
    @usableFromInline let transform: @Sendable (Upstream.Output) -> Output

    @inlinable
    init(upstream: Upstream, transform: @escaping @Sendable (Upstream.Output) -> Output) {
        self.upstream = upstream
        self.transform = transform
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let transform = self.transform
        return upstream.load { completion($0.map(transform)) }
    }
}
