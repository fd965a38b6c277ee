import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Live friend updates from `GET {baseURL}/friends/events`, a `text/event-stream` read chunk by chunk through a
/// `URLSession` data delegate, parsed incrementally, and reconnected with a ``RetryPolicy``'s backoff whenever the
/// connection drops or the server ends it.
///
/// ```swift
/// let updates = ServerSentEventsFriendsUpdates(baseURL: api)
/// let subscription = updates.updates().sink { _ in } receiveValue: { update in print(update) }
/// ```
/// Each subscription opens its own connection; cancelling it closes the connection and stops reconnecting. The
/// attempt count starts over after every successful connection (a 200 response). The stream fails only when the
/// policy gives up, with the last connection's error. Events that are not `upsert` or `remove`, or whose data does
/// not decode, are skipped.
public struct ServerSentEventsFriendsUpdates: FriendsUpdatesSource {
    /// A connection ended with a status other than 200.
    public struct UnexpectedStatus: Error, Equatable {
        /// The status the server answered with.
        public let statusCode: Int
    }

    /// The server ended the event stream (which a live stream should never do, so it is reconnected).
    public struct StreamEnded: Error, Equatable {}

    private let url: URL
    private let configuration: URLSessionConfiguration
    private let reconnection: RetryPolicy
    private let scheduler: any Scheduler
    private let onConnectionChange: (@Sendable (ConnectionChange) -> Void)?

    /// What happened to the connection, for logs and demos.
    public enum ConnectionChange: Sendable {
        /// A connection attempt received a 200 response.
        case connected(attempt: Int)
        /// The connection ended with `error`; a reconnection follows after `delay` unless the policy gives up.
        case disconnected(error: any Error, reconnectingAfter: Duration?)
    }

    /// Creates a source for the API at `baseURL`.
    /// - Parameters:
    ///   - configuration: the session configuration (tests add a `URLProtocol` stub).
    ///   - reconnection: attempts and backoff between connections.
    ///   - scheduler: where reconnection delays run.
    ///   - onConnectionChange: told of every connection and disconnection.
    public init(
        baseURL: URL,
        configuration: URLSessionConfiguration = .default,
        reconnection: RetryPolicy = .exponential(
            initial: .milliseconds(500), maxDelay: .seconds(30), maxAttempts: .max),
        scheduler: some Scheduler = .global(),
        onConnectionChange: (@Sendable (ConnectionChange) -> Void)? = nil
    ) {
        url = baseURL.appendingPathComponent("friends").appendingPathComponent("events")
        self.configuration = configuration
        self.reconnection = reconnection
        self.scheduler = scheduler
        self.onConnectionChange = onConnectionChange
    }

    public func updates() -> EventStream<FriendUpdate, any Error> {
        EventStream { [url, configuration, reconnection, scheduler, onConnectionChange] observer in
            let connection = EventSourceConnection(
                url: url, configuration: configuration, reconnection: reconnection, scheduler: scheduler,
                onConnectionChange: onConnectionChange, observer: observer)
            observer.onTermination { connection.stop() }
            connection.connect()
        }
    }
}

/// One subscription's connection: the current session, the parser, and the reconnection schedule.
private final class EventSourceConnection: NSObject, URLSessionDataDelegate, Sendable {
    private struct State: Sendable {
        var isStopped = false
        var attempt = 0
        var generation = 0
        var session: URLSession?
        var parser = ServerSentEventParser()
        var lastEventID: String?
        var timer: (any CancellationToken)?
        var statusError: (any Error)?
    }

    private let url: URL
    private let configuration: URLSessionConfiguration
    private let reconnection: RetryPolicy
    private let scheduler: any Scheduler
    private let onConnectionChange: (@Sendable (ServerSentEventsFriendsUpdates.ConnectionChange) -> Void)?
    private let observer: StreamObserver<FriendUpdate, any Error>
    /// One serial queue for the callbacks of every session this connection opens, so that events never overlap.
    private let delegateQueue: OperationQueue
    private let state = Locked(State())

    init(
        url: URL,
        configuration: URLSessionConfiguration,
        reconnection: RetryPolicy,
        scheduler: any Scheduler,
        onConnectionChange: (@Sendable (ServerSentEventsFriendsUpdates.ConnectionChange) -> Void)?,
        observer: StreamObserver<FriendUpdate, any Error>
    ) {
        self.url = url
        self.configuration = configuration
        self.reconnection = reconnection
        self.scheduler = scheduler
        self.onConnectionChange = onConnectionChange
        self.observer = observer
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        delegateQueue = queue
    }

    func connect() {
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: delegateQueue)
        let request = state.withLock { state -> URLRequest? in
            guard !state.isStopped else { return nil }
            state.attempt += 1
            state.generation += 1
            state.session = session
            state.parser = ServerSentEventParser()
            state.statusError = nil
            var request = URLRequest(url: url)
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            if let lastEventID = state.lastEventID {
                request.setValue(lastEventID, forHTTPHeaderField: "Last-Event-ID")
            }
            request.timeoutInterval = 24 * 60 * 60
            return request
        }
        guard let request else { return session.invalidateAndCancel() }
        session.dataTask(with: request).resume()
    }

    func stop() {
        let (session, timer) = state.withLock { state -> (URLSession?, (any CancellationToken)?) in
            state.isStopped = true
            defer {
                state.session = nil
                state.timer = nil
            }
            return (state.session, state.timer)
        }
        timer?.cancel()
        session?.invalidateAndCancel()
    }

    private func isCurrent(_ session: URLSession) -> Bool {
        state.withLock { !$0.isStopped && $0.session === session }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else {
            state.withLock { $0.statusError = ServerSentEventsFriendsUpdates.UnexpectedStatus(statusCode: status) }
            return completionHandler(.cancel)
        }
        let attempt = state.withLock { state -> Int in
            defer { state.attempt = 0 }  // a successful connection starts the count over
            return state.attempt
        }
        if isCurrent(session) { onConnectionChange?(.connected(attempt: attempt)) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let events = state.withLock { state -> [ServerSentEvent] in
            guard !state.isStopped, state.session === session else { return [] }
            let events = state.parser.push(data)
            if let id = events.last?.id { state.lastEventID = id }
            return events
        }
        for event in events {
            guard let update = FriendUpdate(event) else { continue }
            observer.send(update)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        session.finishTasksAndInvalidate()
        let decision = state.withLock { state -> (any Error, Int, Duration?)? in
            guard !state.isStopped, state.session === session else { return nil }
            state.session = nil
            let failure = state.statusError ?? error ?? ServerSentEventsFriendsUpdates.StreamEnded()
            let retry = max(state.attempt, 1)
            let willRetry = retry < reconnection.maxAttempts && reconnection.shouldRetry(failure)
            let delay = willRetry ? max(reconnection.backoff.delay(beforeRetry: retry), retryHint(state)) : nil
            return (failure, retry, delay)
        }
        guard let (failure, _, delay) = decision else { return }
        onConnectionChange?(.disconnected(error: failure, reconnectingAfter: delay))
        guard let delay else { return observer.fail(failure) }
        let timer = scheduler.schedule(after: delay) { [weak self] in self?.connect() }
        let isStopped = state.withLock { state -> Bool in
            if !state.isStopped { state.timer = timer }
            return state.isStopped
        }
        if isStopped { timer.cancel() }
    }

    /// The server's `retry:` hint, if it sent one.
    private func retryHint(_ state: State) -> Duration {
        state.parser.retryMilliseconds.map { .milliseconds($0) } ?? .zero
    }
}
