import Loading
import Tracing

/// A store's fetches as spans (swift-distributed-tracing): one span `loading.fetch` per fetch, a child of the span of
/// the request that started it (its task's context), ended when the fetch ends, with its error recorded. Each request
/// that joins the fetch adds a link to the span from its own context, so that a trace of a request that waited for
/// another's fetch leads to it. Under a `FetchCoordination`, the fetch's span has a child `loading.lease` for the time
/// the processes took to settle who fetches, with its outcome (`loading.outcome`). The fetch's call of the upstream is
/// a child `loading.upstream`. Each level operation is a span `loading.level` (`loading.level`, `loading.operation`):
/// a child of the key's fetch while one is in flight (the shared level read while waiting for a lease's holder), of
/// the span current where it ended otherwise (a request's reads before its fetch); without either, it is not traced.
///
/// ```swift
/// let tracing = StoreEventTracing<String>(store: "quotes")
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) },
///     events: tracing.record)
/// ```
public final class StoreEventTracing<Key: Hashable & Sendable>: Sendable {
    private let store: String
    private let tracer: any Tracer
    /// The spans of the fetches in flight, by fetch, and the last fetch in flight of each key.
    private let inFlight = Locked<(spans: [Int: any Span], fetchOf: [Key: Int])>(([:], [:]))

    /// Traces the fetches of the store named `store` with `tracer` (by default the process's tracer).
    public init(store: String, tracer: any Tracer = InstrumentationSystem.tracer) {
        self.store = store
        self.tracer = tracer
    }

    /// Starts, links or ends the span of `event`'s fetch, or traces what it tells of a fetch's steps or of a level.
    public func record(_ event: StoreEvent<Key>) {
        switch event {
        case .fetchStarted(let key, let fetch):
            let span = tracer.startAnySpan("loading.fetch", context: ServiceContext.current ?? .topLevel)
            span.attributes["loading.store"] = store
            span.attributes["loading.key"] = "\(key)"
            inFlight.withLock { inFlight in
                inFlight.spans[fetch] = span
                inFlight.fetchOf[key] = fetch
            }
        case .fetchJoined(_, let fetch):
            guard let span = inFlight.withLock({ $0.spans[fetch] }), let context = ServiceContext.current else {
                return
            }
            span.addLink(SpanLink(context: context, attributes: [:]))
        case .fetchEnded(let key, let fetch, _, let error):
            let ended = inFlight.withLock { inFlight in
                if inFlight.fetchOf[key] == fetch { inFlight.fetchOf[key] = nil }
                return inFlight.spans.removeValue(forKey: fetch)
            }
            guard let span = ended else { return }
            end(span, error: error)
        case .fetchCoordinated(_, let fetch, let outcome, let duration):
            guard let parent = inFlight.withLock({ $0.spans[fetch] }) else { return }
            let span = startSpan("loading.lease", under: parent.context, lasting: duration)
            span.attributes["loading.outcome"] = outcome.rawValue
            end(span, error: nil)
        case .upstreamCalled(_, let fetch, let duration, let error):
            guard let parent = inFlight.withLock({ $0.spans[fetch] }) else { return }
            end(startSpan("loading.upstream", under: parent.context, lasting: duration), error: error)
        case .levelOperationEnded(let key, let level, let operation, let duration, let error):
            let fetch = inFlight.withLock { inFlight in
                key.flatMap { inFlight.fetchOf[$0] }.flatMap { inFlight.spans[$0] }
            }
            guard let parent = fetch?.context ?? ServiceContext.current else { return }
            let span = startSpan("loading.level", under: parent, lasting: duration)
            span.attributes["loading.level"] = level
            span.attributes["loading.operation"] = operation.rawValue
            end(span, error: error)
        case .heldValueRead, .levelRead, .levelWritten, .evicted:
            return
        }
    }

    /// A span named `name`, a child of `parent`, started `duration` ago: it is told once ended, and dated back.
    private func startSpan(_ name: String, under parent: ServiceContext, lasting duration: Duration) -> any Span {
        let now = DefaultTracerClock.now.nanosecondsSinceEpoch
        let began = now - min(now, UInt64(max(0, duration / .nanoseconds(1))))
        let span = tracer.startSpan(
            name, context: parent, ofKind: .internal, at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: began),
            function: #function, file: #fileID, line: #line)
        span.attributes["loading.store"] = store
        return span
    }

    /// Ends `span` now, with `error` recorded when there is one.
    private func end(_ span: any Span, error: (any Error)?) {
        if let error {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }
}
