extension Loader {
    /// Loads from `fallback` when this loader fails; `fallback` is never touched when this loader succeeds.
    ///
    /// Chains to any depth, trying each source in order:
    /// ```swift
    /// let friends = memory.fallback(to: database).fallback(to: remote)
    /// ```
    /// When both fail, the load fails with the **fallback's** error (so a chain fails with its last source's
    /// error, the one that usually says most, such as a network error).
    @inlinable
    public func fallback<Fallback: Loader>(to fallback: Fallback) -> FallbackLoader<Self, Fallback>
    where Fallback.Output == Output {
        FallbackLoader(primary: self, fallback: fallback)
    }
}

/// A loader that tries a primary loader and, only if it fails, a fallback. See ``Loader/fallback(to:)``.
///
/// A class (immutable, so `Sendable`): each load captures one reference instead of copying the chain below it. Its
/// load is compiled where the loader is built, for the types it is built with, so a load reached through
/// `any Loader` runs that code too.
///
/// Delivers on the thread of whichever loader finished last. Cancelling cancels whichever of the two is in flight,
/// and once the primary has been cancelled the fallback is never started.
public final class FallbackLoader<Primary: Loader, Fallback: Loader>: Loader where Primary.Output == Fallback.Output {
    @usableFromInline let primary: Primary
    @usableFromInline let fallback: Fallback
    /// Starts a load of the loader given: made in `init`, so compiled where the loader is built. It captures
    /// nothing, so it costs no allocation.
    @usableFromInline let start:
        @Sendable (FallbackLoader, @escaping LoadCompletion<Primary.Output>) -> any CancellationToken

    @inlinable
    init(primary: Primary, fallback: Fallback) {
        self.primary = primary
        self.fallback = fallback
        start = { loader, completion in
            let pending = PendingLoad(completion)
            pending.startFirstStep {
                loader.primary.load { result in
                    switch result {
                    case .success:
                        pending.complete(result)
                    case .failure:
                        pending.startStep { loader.fallback.load { pending.complete($0) } }
                    }
                }
            }
            return pending
        }
    }

    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Primary.Output>) -> any CancellationToken {
        start(self, completion)
    }
}
