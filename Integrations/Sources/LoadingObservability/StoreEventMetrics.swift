import Loading
import Metrics

/// A store's events as metrics (swift-metrics), each with the dimension `store`:
///
/// - `loading_reads_held_total`: reads answered from the value the store holds;
/// - `loading_level_reads_total` (`level`, `outcome`: `hit`, `miss` or `failed`): level reads;
/// - `loading_level_write_failures_total` (`level`, `operation`): level saves and removals that failed;
/// - `loading_fetches_total` (`outcome`: `success`, `failure` or `cancelled`) and `loading_fetch_duration_seconds`
///   (a timer): fetches that ended;
/// - `loading_fetch_joins_total`: callers that joined a fetch in flight;
/// - `loading_evictions_total`: kept values the store let go of to stay within its bound;
/// - `loading_fetch_coordinations_total` (`outcome`: `acquired`, `answeredByHolder`, `takenOver`, `failedBefore`,
///   `waitedOut` or `unreachable`) and `loading_fetch_coordination_duration_seconds` (a timer): how fetches under a
///   `FetchCoordination` were settled, and how long it took;
/// - `loading_level_operation_duration_seconds` (`level`, `operation`: `read`, `save`, `removal` or
///   `removal of every value`; a timer): how long each level operation took;
/// - `loading_upstream_duration_seconds` (a timer): how long the fetches' upstream calls took.
///
/// ```swift
/// let metrics = StoreEventMetrics<String>(store: "quotes")
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     events: metrics.record)
/// ```
public final class StoreEventMetrics<Key: Hashable & Sendable>: Sendable {
    private let store: String
    private let factory: any MetricsFactory
    /// The counters made so far, by label and dimensions: made once each.
    private let counters = Locked<[String: Counter]>([:])
    /// The timers of level operations made so far, by level and operation.
    private let levelDurations = Locked<[String: Timer]>([:])
    private let fetchDuration: Timer
    private let coordinationDuration: Timer
    private let upstreamDuration: Timer

    /// Counts the events of the store named `store` with `factory` (by default the process's metrics backend).
    public init(store: String, factory: any MetricsFactory = MetricsSystem.factory) {
        self.store = store
        self.factory = factory
        fetchDuration = Timer(label: "loading_fetch_duration_seconds", dimensions: [("store", store)], factory: factory)
        coordinationDuration = Timer(
            label: "loading_fetch_coordination_duration_seconds", dimensions: [("store", store)], factory: factory)
        upstreamDuration = Timer(
            label: "loading_upstream_duration_seconds", dimensions: [("store", store)], factory: factory)
    }

    /// Counts `event`.
    public func record(_ event: StoreEvent<Key>) {
        switch event {
        case .heldValueRead:
            increment("loading_reads_held_total")
        case .evicted:
            increment("loading_evictions_total")
        case .levelRead(_, let level, let outcome):
            let name =
                switch outcome {
                case .hit: "hit"
                case .miss: "miss"
                case .failed: "failed"
                }
            increment("loading_level_reads_total", [("level", level), ("outcome", name)])
        case .levelWritten(_, let level, let operation, let error):
            guard error != nil else { return }
            increment("loading_level_write_failures_total", [("level", level), ("operation", operation.rawValue)])
        case .fetchStarted:
            return
        case .fetchJoined:
            increment("loading_fetch_joins_total")
        case .fetchEnded(_, _, let duration, let error):
            let outcome = error == nil ? "success" : error is CancellationError ? "cancelled" : "failure"
            increment("loading_fetches_total", [("outcome", outcome)])
            fetchDuration.record(duration: duration)
        case .fetchCoordinated(_, _, let outcome, let duration):
            increment("loading_fetch_coordinations_total", [("outcome", outcome.rawValue)])
            coordinationDuration.record(duration: duration)
        case .levelOperationEnded(_, let level, let operation, let duration, _):
            levelDuration(level, operation).record(duration: duration)
        case .upstreamCalled(_, _, let duration, _):
            upstreamDuration.record(duration: duration)
        }
    }

    /// The timer of `operation` on `level`, made on first use.
    private func levelDuration(_ level: String, _ operation: LevelOperation) -> Timer {
        levelDurations.withLock { timers in
            let id = level + "|" + operation.rawValue
            if let timer = timers[id] { return timer }
            let timer = Timer(
                label: "loading_level_operation_duration_seconds",
                dimensions: [("store", store), ("level", level), ("operation", operation.rawValue)], factory: factory)
            timers[id] = timer
            return timer
        }
    }

    private func increment(_ label: String, _ dimensions: [(String, String)] = []) {
        let dimensions = [("store", store)] + dimensions
        let id = ([label] + dimensions.map { "\($0.0)=\($0.1)" }).joined(separator: "|")
        let counter = counters.withLock { counters in
            if let counter = counters[id] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            counters[id] = counter
            return counter
        }
        counter.increment()
    }
}
