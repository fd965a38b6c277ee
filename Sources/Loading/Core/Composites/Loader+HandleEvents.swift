extension Loader {
    /// Calls the given closures as a load starts, succeeds, fails or is cancelled, without changing it: the hook
    /// for logging, metrics and tracing around any composite.
    ///
    /// ```swift
    /// let measured = remote.handleEvents(
    ///     onStart: { metrics.begin("friends") },
    ///     onValue: { metrics.end("friends", count: $0.count) })
    /// ```
    /// Each closure runs before the completion sees the event, on the thread of the event (`onStart` and
    /// `onCancel` on the caller's thread). `onCancel` runs only for a load cancelled while still pending.
    public func handleEvents(
        onStart: (@Sendable () -> Void)? = nil,
        onValue: (@Sendable (Output) -> Void)? = nil,
        onFailure: (@Sendable (any Error) -> Void)? = nil,
        onCancel: (@Sendable () -> Void)? = nil
    ) -> HandleEventsLoader<Self> {
        HandleEventsLoader(
            upstream: self,
            events: LoadEvents(onStart: onStart, onValue: onValue, onFailure: onFailure, onCancel: onCancel))
    }

}

/// The closures a ``HandleEventsLoader`` calls.
struct LoadEvents<Output>: Sendable {
    var onStart: (@Sendable () -> Void)?
    var onValue: (@Sendable (Output) -> Void)?
    var onFailure: (@Sendable (any Error) -> Void)?
    var onCancel: (@Sendable () -> Void)?
}

/// A loader that reports its upstream's events to closures. See
/// ``Loader/handleEvents(onStart:onValue:onFailure:onCancel:)``.
public final class HandleEventsLoader<Upstream: Loader>: Loader {
    private let upstream: Upstream
    private let events: LoadEvents<Upstream.Output>

    init(upstream: Upstream, events: LoadEvents<Upstream.Output>) {
        self.upstream = upstream
        self.events = events
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Upstream.Output>) -> any CancellationToken {
        events.onStart?()
        guard let onCancel = events.onCancel else {
            // Without a cancel hook, no state is needed: forward the upstream's own token.
            return upstream.load { [self] result in
                Self.report(result, to: events)
                completion(result)
            }
        }
        let pending = PendingLoad(completion)
        pending.startFirstStep {
            upstream.load { [self] result in
                guard let deliver = pending.takeCompletion() else { return }
                Self.report(result, to: events)
                deliver(result)
            }
        }
        return AnyCancellationToken {
            if pending.cancelReportingPending() { onCancel() }
        }
    }

    private static func report(_ result: Result<Upstream.Output, any Error>, to events: LoadEvents<Upstream.Output>) {
        switch result {
        case .success(let value): events.onValue?(value)
        case .failure(let error): events.onFailure?(error)
        }
    }
}
