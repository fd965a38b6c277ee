import Loading
import Logging

/// A store's events as logs (swift-log): what failed at `warning` (a level's read or write, with the key and the
/// level; a fetch, with its error; a lease waited out or unreachable), fetches at `debug` (started, joined, ended with
/// their duration, coordinated with the other processes, their upstream calls with their duration), hits and level
/// operations' durations at `trace`.
///
/// ```swift
/// let log = StoreEventLog<String>(store: "quotes", logger: Logger(label: "quotes"))
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     events: log.record)
/// ```
public struct StoreEventLog<Key: Hashable & Sendable>: Sendable {
    private let store: String
    private let logger: Logger

    /// Logs the events of the store named `store` to `logger`.
    public init(store: String, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Logs `event`.
    public func record(_ event: StoreEvent<Key>) {
        var metadata: Logger.Metadata = ["store": "\(store)"]
        switch event {
        case .heldValueRead(let key):
            metadata["key"] = "\(key)"
            logger.trace("read the value the store holds", metadata: metadata)
        case .evicted(let key):
            metadata["key"] = "\(key)"
            logger.trace("kept value let go of", metadata: metadata)
        case .levelRead(let key, let level, let outcome):
            metadata["key"] = "\(key)"
            metadata["level"] = "\(level)"
            switch outcome {
            case .hit: logger.trace("level hit", metadata: metadata)
            case .miss: logger.trace("level miss", metadata: metadata)
            case .failed(let error):
                metadata["error"] = "\(error)"
                logger.warning("level read failed: counted as a miss", metadata: metadata)
            }
        case .levelWritten(let key, let level, let operation, let error):
            guard let error else { return }
            metadata["key"] = key.map { "\($0)" } ?? "every key"
            metadata["level"] = "\(level)"
            metadata["error"] = "\(error)"
            logger.warning("level \(operation.rawValue) failed", metadata: metadata)
        case .fetchStarted(let key, let fetch):
            metadata["key"] = "\(key)"
            metadata["fetch"] = "\(fetch)"
            logger.debug("fetch started", metadata: metadata)
        case .fetchJoined(let key, let fetch):
            metadata["key"] = "\(key)"
            metadata["fetch"] = "\(fetch)"
            logger.debug("fetch joined", metadata: metadata)
        case .fetchEnded(let key, let fetch, let duration, let error):
            metadata["key"] = "\(key)"
            metadata["fetch"] = "\(fetch)"
            metadata["duration"] = "\(duration)"
            if let error, !(error is CancellationError) {
                metadata["error"] = "\(error)"
                logger.warning("fetch failed", metadata: metadata)
            } else {
                logger.debug(error == nil ? "fetch ended" : "fetch cancelled", metadata: metadata)
            }
        case .fetchCoordinated(let key, let fetch, let outcome, let duration):
            metadata["key"] = "\(key)"
            metadata["fetch"] = "\(fetch)"
            metadata["outcome"] = "\(outcome.rawValue)"
            metadata["duration"] = "\(duration)"
            switch outcome {
            case .acquired, .answeredByHolder, .takenOver, .failedBefore:
                logger.debug("fetch coordinated", metadata: metadata)
            case .waitedOut: logger.warning("lease holder waited out: fetching without the lease", metadata: metadata)
            case .unreachable: logger.warning("lease unreachable: fetching without it", metadata: metadata)
            }
        case .levelOperationEnded(let key, let level, let operation, let duration, _):
            metadata["key"] = key.map { "\($0)" } ?? "every key"
            metadata["level"] = "\(level)"
            metadata["duration"] = "\(duration)"
            logger.trace("level \(operation.rawValue) ended", metadata: metadata)
        case .upstreamCalled(let key, let fetch, let duration, _):
            metadata["key"] = "\(key)"
            metadata["fetch"] = "\(fetch)"
            metadata["duration"] = "\(duration)"
            logger.debug("upstream call ended", metadata: metadata)
        }
    }
}
