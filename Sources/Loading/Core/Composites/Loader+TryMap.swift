extension Loader {
    /// Transforms each loaded value with a throwing function: an error it throws is the load's failure.
    ///
    /// ```swift
    /// let first = friends.tryMap { friends in
    ///     guard let friend = friends.first else { throw CacheMiss.absent }
    ///     return friend
    /// }
    /// ```
    /// Runs `transform` on the thread the upstream delivers on; cancelling cancels the upstream load.
    @inlinable
    public func tryMap<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) throws -> NewOutput
    ) -> TryMapLoader<Self, NewOutput> {
        TryMapLoader(upstream: self, transform: transform)
    }
}

/// A loader that transforms its upstream's value with a throwing function. See ``Loader/tryMap(_:)``.
public struct TryMapLoader<Upstream: Loader, Output: Sendable>: Loader {
    @usableFromInline let upstream: Upstream
    @usableFromInline let transform: @Sendable (Upstream.Output) throws -> Output

    @inlinable
    init(upstream: Upstream, transform: @escaping @Sendable (Upstream.Output) throws -> Output) {
        self.upstream = upstream
        self.transform = transform
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let transform = self.transform
        return upstream.load { result in completion(result.flatMap { value in Result { try transform(value) } }) }
    }
}
