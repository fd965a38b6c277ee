extension Loader {
    /// Saves every successfully loaded value to `cache`; failures are never cached.
    ///
    /// ```swift
    /// let remote = remoteLoader.caching(to: database).caching(to: memory)
    /// ```
    /// - Parameters:
    ///   - cache: where loaded values are saved.
    ///   - policy: what a failed save does to the load. The default, ``CacheSavePolicy/ignoreFailures``, delivers
    ///     the value without waiting for the save.
    @inlinable
    public func caching<C: Cache>(to cache: C, policy: CacheSavePolicy = .ignoreFailures) -> CachingLoader<Self, C>
    where C.Value == Output {
        CachingLoader(upstream: self, cache: cache, policy: policy)
    }
}

/// What a caching loader does when saving a loaded value fails.
public struct CacheSavePolicy: Sendable {
    @usableFromInline
    enum Kind: Sendable {
        case ignore
        case report(@Sendable (any Error) -> Void)
        case fail
    }

    @usableFromInline let kind: Kind

    /// Start the save and deliver the value at once; a failed save is ignored.
    public static let ignoreFailures = CacheSavePolicy(kind: .ignore)

    /// Start the save and deliver the value at once; a failed save's error is passed to `handler` when it happens.
    public static func reportFailures(to handler: @escaping @Sendable (any Error) -> Void) -> CacheSavePolicy {
        CacheSavePolicy(kind: .report(handler))
    }

    /// Wait for the save; deliver the value if it succeeds and the save's error (unchanged) if it fails.
    public static let failLoad = CacheSavePolicy(kind: .fail)
}

/// A loader that saves each value its upstream loads to a cache. See ``Loader/caching(to:policy:)``.
///
/// A class (immutable, so `Sendable`): each load captures one reference instead of copying the cache. Like
/// ``FallbackLoader``, its load is compiled where it is built.
///
/// Delivers on the upstream's thread (or, with ``CacheSavePolicy/failLoad``, on the cache's completion thread).
/// Cancelling cancels the upstream load; a save already started is not undone, but its outcome is not delivered.
public final class CachingLoader<Upstream: Loader, C: Cache>: Loader where C.Value == Upstream.Output {
    @usableFromInline let upstream: Upstream
    @usableFromInline let cache: C
    /// Starts a load of the loader given, under the save policy it was built with: made in `init`, so compiled where
    /// the loader is built. It captures nothing but a report's handler.
    @usableFromInline let start:
        @Sendable (CachingLoader, @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken

    @inlinable
    init(upstream: Upstream, cache: C, policy: CacheSavePolicy) {
        self.upstream = upstream
        self.cache = cache
        switch policy.kind {
        case .ignore:
            start = { loader, completion in
                loader.upstream.load { result in
                    if case .success(let value) = result {
                        loader.cache.save(value) { _ in }
                    }
                    completion(result)
                }
            }
        case .report(let handler):
            start = { loader, completion in
                loader.upstream.load { result in
                    if case .success(let value) = result {
                        loader.cache.save(value) { saved in
                            if case .failure(let error) = saved { handler(error) }
                        }
                    }
                    completion(result)
                }
            }
        case .fail:
            start = { loader, completion in
                let pending = PendingLoad(completion)
                pending.startFirstStep {
                    loader.upstream.load { result in
                        guard case .success(let value) = result else { return pending.complete(result) }
                        guard !pending.isFinished else { return }
                        loader.cache.save(value) { saved in
                            pending.complete(saved.map { value })
                        }
                    }
                }
                return pending
            }
        }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        start(self, completion)
    }
}
