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
        MapLoader(upstream: self) { $0.map(transform) }
    }

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
    ) -> MapLoader<Self, NewOutput> {
        MapLoader(upstream: self) { result in result.flatMap { value in Result { try transform(value) } } }
    }

    /// Transforms each failure's error, for example into a domain error type.
    ///
    /// ```swift
    /// let typed = remote.mapError { FriendsError.unavailable(underlying: $0) }
    /// ```
    @inlinable
    public func mapError(_ transform: @escaping @Sendable (any Error) -> any Error) -> MapLoader<Self, Output> {
        MapLoader(upstream: self) { $0.mapError(transform) }
    }
}

/// A loader that transforms its upstream's result: its value (``Loader/map(_:)``, ``Loader/tryMap(_:)``) or its
/// error (``Loader/mapError(_:)``).
public struct MapLoader<Upstream: Loader, Output: Sendable>: Loader {
    /// Starts a load: made in `init`, so compiled where the loader is built, for its types. It captures what the
    /// loader holds (a struct has no reference of its own to hand it).
    @usableFromInline let start: @Sendable (@escaping LoadCompletion<Output>) -> any CancellationToken

    @inlinable
    init(
        upstream: Upstream,
        transform: @escaping @Sendable (Result<Upstream.Output, any Error>) -> Result<Output, any Error>
    ) {
        start = { completion in upstream.load { completion(transform($0)) } }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        start(completion)
    }
}
