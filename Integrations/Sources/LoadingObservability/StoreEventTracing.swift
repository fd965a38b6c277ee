import Loading
import Tracing

/// A store's fetches as spans (swift-distributed-tracing): one span `loading.fetch` per fetch, a child of the span of
/// the request that started it (its task's context), ended when the fetch ends, with its error recorded. Each request
/// that joins the fetch adds a link to the span from its own context, so that a trace of a request that waited for
/// another's fetch leads to it. Under a `FetchCoordination`, the fetch's span has a child `loading.lease` for the time
/// the processes took to settle who fetches, with its outcome (`loading.outcome`).
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
    /// The spans of the fetches in flight, by fetch.
    private let spans = Locked<[Int: any Span]>([:])

    /// Traces the fetches of the store named `store` with `tracer` (by default the process's tracer).
    public init(store: String, tracer: any Tracer = InstrumentationSystem.tracer) {
        self.store = store
        self.tracer = tracer
    }

    /// Starts, links or ends the span of `event`'s fetch; other events are not traced.
    public func record(_ event: StoreEvent<Key>) {
        switch event {
        case .fetchStarted(let key, let fetch):
            let span = tracer.startAnySpan("loading.fetch", context: ServiceContext.current ?? .topLevel)
            span.attributes["loading.store"] = store
            span.attributes["loading.key"] = "\(key)"
            spans.withLock { $0[fetch] = span }
        case .fetchJoined(_, let fetch):
            guard let span = spans.withLock({ $0[fetch] }), let context = ServiceContext.current else { return }
            span.addLink(SpanLink(context: context, attributes: [:]))
        case .fetchEnded(_, let fetch, _, let error):
            guard let span = spans.withLock({ $0.removeValue(forKey: fetch) }) else { return }
            if let error {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        case .fetchCoordinated(_, let fetch, let outcome, let duration):
            guard let parent = spans.withLock({ $0[fetch] }) else { return }
            // Told once settled: the span is dated back to when the coordination began.
            let now = DefaultTracerClock.now.nanosecondsSinceEpoch
            let began = now - min(now, UInt64(max(0, duration / .nanoseconds(1))))
            let span = tracer.startSpan(
                "loading.lease", context: parent.context, ofKind: .internal,
                at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: began), function: #function, file: #fileID,
                line: #line)
            span.attributes["loading.store"] = store
            span.attributes["loading.outcome"] = outcome.rawValue
            span.end(at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: now))
        case .heldValueRead, .levelRead, .levelWritten, .evicted:
            return
        }
    }
}
