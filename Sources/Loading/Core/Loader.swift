/// The completion handler of a load: called exactly once with the loaded value or the error, unless the load is
/// cancelled first.
public typealias LoadCompletion<Output> = @Sendable (Result<Output, any Error>) -> Void

/// A source of one value of `Output`, loaded asynchronously: a memory store, a database, a network API, or a
/// composition of them.
///
/// Loaders compose fluently; the composition reads as the sentence it implements:
/// ```swift
/// let friends = memory
///     .fallback(to: database.caching(to: memory))
///     .fallback(to: remote.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
///         .caching(to: database)
///         .caching(to: memory))
///     .dispatchOnMainQueue()
/// ```
///
/// ## Contract
/// Every conforming type, and every composite in this library, keeps these rules (the full text is in the
/// *Contract* article of the documentation):
/// - `load(completion:)` calls `completion` exactly once, unless the returned token is cancelled first.
/// - Once `cancel()` returns, no call of `completion` begins (one that already began on another thread may still
///   be running; called from the delivering thread, nothing arrives after it); cancelling reaches the work in flight.
/// - No lock is held while user code runs: completions, hooks, and the deinitializers of released closures.
/// - `load(completion:)` may be called from any thread, any number of times, concurrently.
/// - Unless a composite says otherwise, `completion` runs on whatever thread the work finished on.
public protocol Loader<Output>: Sendable {
    /// The type of the loaded value.
    associatedtype Output: Sendable

    /// Starts a load and returns a token that cancels it.
    @discardableResult
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken
}
