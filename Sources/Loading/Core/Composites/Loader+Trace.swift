/// What happened in one traced load, and when: for logs, metrics and timelines. See ``TracedLoader``.
public struct LoadEvent: Sendable {
    /// What happened.
    public enum Kind: Sendable {
        /// The load started.
        case started
        /// A step (a cache level, the network...) was asked.
        case stepStarted(String)
        /// A step delivered a value after `duration`.
        case stepSucceeded(String, duration: Duration)
        /// A step failed after `duration`: a miss, an expired cache, a timeout (``TimeoutError``), a network error.
        case stepFailed(String, error: any Error, duration: Duration)
        /// Attempt `attempt` (2 for the first retry) starts after waiting `delay`, because of `error`.
        case retrying(attempt: Int, delay: Duration, error: any Error)
        /// The load delivered a value after `duration`.
        case succeeded(duration: Duration)
        /// The load failed after `duration`.
        case failed(any Error, duration: Duration)
        /// The load was cancelled after `duration`.
        case cancelled(duration: Duration)
    }

    /// The load this event belongs to: every event of one load has the same identity, loads that overlap differ.
    public let load: UInt64
    /// The label of the traced loader.
    public let label: String
    /// When it happened.
    let time: ContinuousClock.Instant
    /// How long after the load started it happened.
    public let elapsed: Duration
    /// What happened.
    public let kind: Kind
}

/// One traced load: ``TracedLoader`` makes one per load and hands it to the chain it builds, whose steps report to it
/// with ``Loader/step(_:of:)`` and ``RetryPolicy/reporting(to:)``; its events carry its identity and label.
public final class LoadTrace: Sendable {
    private static let lastID = Locked<UInt64>(0)

    /// The load's identity, unique in the process.
    private let id: UInt64
    /// The label of the traced loader.
    private let label: String
    /// When the load started.
    let start: ContinuousClock.Instant
    private let observer: @Sendable (LoadEvent) -> Void

    /// Starts a trace whose events go to `observer`.
    init(label: String, observer: @escaping @Sendable (LoadEvent) -> Void) {
        id = Self.lastID.withLock { id in
            id &+= 1
            return id
        }
        self.label = label
        start = .now
        self.observer = observer
    }

    /// Reports `kind` now.
    func record(_ kind: LoadEvent.Kind) {
        let now = ContinuousClock.now
        observer(LoadEvent(load: id, label: label, time: now, elapsed: now - start, kind: kind))
    }
}

extension RetryPolicy {
    /// A copy that reports every retry to `trace` as ``LoadEvent/Kind/retrying(attempt:delay:error:)``.
    public func reporting(to trace: LoadTrace) -> RetryPolicy {
        observingRetries { retry, delay, error in
            trace.record(.retrying(attempt: retry < .max ? retry + 1 : retry, delay: delay, error: error))
        }
    }
}

extension Loader {
    /// This loader as a step of the load `trace` follows: each of its loads reports when it started, and when it
    /// succeeded or failed, with its duration.
    ///
    /// ```swift
    /// let friends = TracedLoader("friends", observer: log) { trace in
    ///     memory.step("memory", of: trace)
    ///         .fallback(to: remote.retry(.immediate(maxAttempts: 2).reporting(to: trace)).step("network", of: trace))
    /// }
    /// ```
    public func step(_ name: String, of trace: LoadTrace) -> AnyLoader<Output> {
        AnyLoader { completion in
            let start = ContinuousClock.now
            trace.record(.stepStarted(name))
            return load { result in
                let duration = ContinuousClock.now - start
                switch result {
                case .success: trace.record(.stepSucceeded(name, duration: duration))
                case .failure(let error): trace.record(.stepFailed(name, error: error, duration: duration))
                }
                completion(result)
            }
        }
    }
}

/// A loader whose every load is traced: for each load it starts a ``LoadTrace``, builds the chain `makeLoader`
/// returns for it (whose steps report to the trace), and reports the load's start, its end (succeeded, failed or
/// cancelled) and its duration, so that overlapping loads never mix their events.
///
/// ```swift
/// let log: @Sendable (LoadEvent) -> Void = { event in print(event.load, event.elapsed, event.kind) }
/// let friends = TracedLoader("friends", observer: log) { trace in
///     memory.step("memory", of: trace)
///         .fallback(to: remote.retry(.immediate(maxAttempts: 2).reporting(to: trace)).step("network", of: trace))
/// }
/// ```
/// Building the chain for each load costs a little: trace what you watch, not every hot path.
public struct TracedLoader<Output: Sendable>: Loader {
    private let label: String
    private let observer: @Sendable (LoadEvent) -> Void
    private let makeLoader: @Sendable (LoadTrace) -> AnyLoader<Output>

    /// Creates a loader labelled `label` whose loads report to `observer` and run the chain `makeLoader` builds.
    public init<L: Loader>(
        _ label: String,
        observer: @escaping @Sendable (LoadEvent) -> Void,
        _ makeLoader: @escaping @Sendable (LoadTrace) -> L
    ) where L.Output == Output {
        self.label = label
        self.observer = observer
        self.makeLoader = { AnyLoader(makeLoader($0)) }
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let trace = LoadTrace(label: label, observer: observer)
        trace.record(.started)
        let pending = PendingLoad<Output> { result in
            let duration = ContinuousClock.now - trace.start
            switch result {
            case .success: trace.record(.succeeded(duration: duration))
            case .failure(let error): trace.record(.failed(error, duration: duration))
            }
            completion(result)
        }
        let loader = makeLoader(trace)
        pending.startStep { loader.load { pending.complete($0) } }
        return AnyCancellationToken {
            guard pending.cancelReportingPending() else { return }
            trace.record(.cancelled(duration: ContinuousClock.now - trace.start))
        }
    }
}
