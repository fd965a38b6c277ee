import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Live friend updates from `GET {baseURL}/friends/events`, a `text/event-stream` read chunk by chunk through a
/// `URLSession` data delegate, parsed incrementally, and reconnected by the stream `retry` operator with a
/// ``RetryPolicy`` whenever the connection drops or the server ends it.
///
/// ```swift
/// let updates = ServerSentEventsFriendsUpdates(baseURL: api)
/// let subscription = updates.updates().sink { _ in } receiveValue: { update in print(update) }
/// ```
/// Each subscription opens its own connection; cancelling it closes the connection and stops reconnecting. A
/// reconnection sends the last event id seen (`Last-Event-ID`) and waits at least as long as the server's `retry:`
/// field asked, within the policy's maximum delay. The default policy backs off exponentially and starts the count
/// over once a connection has stayed up for 10 seconds, so a server that accepts and drops at once is not hammered.
/// The stream fails only when the policy gives up, with the last connection's error. Events that are not `upsert`
/// or `remove`, or whose data does not decode, are skipped.
public struct ServerSentEventsFriendsUpdates: FriendsUpdatesSource {
    /// A connection ended with a status other than 200.
    public struct UnexpectedStatus: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// The status the server answered with.
        public let statusCode: Int

        /// Creates the error for a response with `statusCode`.
        public init(statusCode: Int) {
            self.statusCode = statusCode
        }

        public var description: String {
            "The live updates endpoint answered with status \(statusCode) instead of an event stream."
        }

        public var errorDescription: String? { description }
    }

    /// The server ended the event stream (which a live stream should never do, so it is reconnected).
    public struct StreamEnded: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String { "The server ended the live updates stream." }

        public var errorDescription: String? { description }
    }

    private let url: URL
    private let configuration: URLSessionConfiguration
    private let reconnection: RetryPolicy
    private let scheduler: any Scheduler
    private let onConnectionChange: (@Sendable (ConnectionChange) -> Void)?

    /// What happened to the connection, for logs and demos.
    public enum ConnectionChange: Sendable {
        /// A connection attempt received a 200 response; `attempt` counts the attempts since the last one that did.
        case connected(attempt: Int)
        /// The connection ended with `error`.
        case disconnected(error: any Error)
        /// The next connection attempt waits `delay` (reported for every wait the policy asks for).
        case reconnecting(after: Duration)
    }

    /// Creates a source for the API at `baseURL`.
    /// - Parameters:
    ///   - configuration: the session configuration (tests add a `URLProtocol` stub).
    ///   - reconnection: attempts, backoff and reset interval between connections.
    ///   - scheduler: where reconnection delays run.
    ///   - onConnectionChange: told of every connection, disconnection and wait.
    public init(
        baseURL: URL,
        configuration: URLSessionConfiguration = .default,
        reconnection: RetryPolicy = .exponential(initial: .milliseconds(500), maxDelay: .seconds(30), maxAttempts: .max)
            .resettingAttempts(after: .seconds(10)),
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
        let (url, configuration, onConnectionChange) = (url, configuration, onConnectionChange)
        let reconnection = reconnection
        let waits = ReportingScheduler(base: scheduler) { onConnectionChange?(.reconnecting(after: $0)) }
        return EventStream.deferred {
            // What outlives one connection: the last event id and the server's retry hint.
            let memory = Locked(ConnectionMemory())
            return EventStream<FriendUpdate, any Error> { observer in
                let connection = EventSourceConnection(
                    url: url, configuration: configuration, memory: memory,
                    onConnectionChange: onConnectionChange, observer: observer)
                observer.onTermination { connection.stop() }
                connection.connect()
            }
            .retry(reconnection, scheduler: waits)
            .mapError { ($0 as? Disconnection)?.reason ?? $0 }
        }
    }
}

/// What a subscription remembers from one connection to the next.
private struct ConnectionMemory: Sendable {
    var lastEventID: String?
    var retryHint: Duration?
    /// Attempts since the last successful connection.
    var attempts = 0
}

/// Why a connection ended, with the wait the server asked for: what the retry policy sees.
private struct Disconnection: RetryAfterError {
    let reason: any Error
    let retryAfter: Duration?
}

/// A scheduler that reports each delay it is asked to wait, then waits on `base`.
private struct ReportingScheduler: Scheduler {
    let base: any Scheduler
    let report: @Sendable (Duration) -> Void

    var now: Duration { base.now }

    func schedule(_ action: @escaping @Sendable () -> Void) {
        base.schedule(action)
    }

    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        report(delay)
        return base.schedule(after: delay, action)
    }
}

/// One connection: its session and parser; it sends the updates it reads, and fails with a ``Disconnection`` when
/// the connection ends for any reason.
private final class EventSourceConnection: NSObject, URLSessionDataDelegate, Sendable {
    private struct State: Sendable {
        var isStopped = false
        var session: URLSession?
        var parser = ServerSentEventParser()
        var statusError: (any Error)?
    }

    private let url: URL
    private let configuration: URLSessionConfiguration
    private let memory: Locked<ConnectionMemory>
    private let onConnectionChange: (@Sendable (ServerSentEventsFriendsUpdates.ConnectionChange) -> Void)?
    private let observer: StreamObserver<FriendUpdate, any Error>
    /// A serial queue for the session's callbacks, so that events never overlap.
    private let delegateQueue: OperationQueue
    private let state = Locked(State())

    init(
        url: URL,
        configuration: URLSessionConfiguration,
        memory: Locked<ConnectionMemory>,
        onConnectionChange: (@Sendable (ServerSentEventsFriendsUpdates.ConnectionChange) -> Void)?,
        observer: StreamObserver<FriendUpdate, any Error>
    ) {
        self.url = url
        self.configuration = configuration
        self.memory = memory
        self.onConnectionChange = onConnectionChange
        self.observer = observer
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        delegateQueue = queue
    }

    func connect() {
        let lastEventID = memory.withLock { memory in
            memory.attempts += 1
            return memory.lastEventID
        }
        var request = URLRequest(url: url)
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        if let lastEventID { request.setValue(lastEventID, forHTTPHeaderField: "Last-Event-ID") }
        request.timeoutInterval = 24 * 60 * 60
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: delegateQueue)
        let isStopped = state.withLock { state -> Bool in
            if !state.isStopped { state.session = session }
            return state.isStopped
        }
        guard !isStopped else { return session.invalidateAndCancel() }
        session.dataTask(with: request).resume()
    }

    func stop() {
        let session = state.withLock { state -> URLSession? in
            state.isStopped = true
            defer { state.session = nil }
            return state.session
        }
        session?.invalidateAndCancel()
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
        let attempt = memory.withLock { memory in
            defer { memory.attempts = 0 }
            return memory.attempts
        }
        if state.withLock({ !$0.isStopped }) { onConnectionChange?(.connected(attempt: attempt)) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let (parsed, retryHint) = state.withLock { state -> (Result<[ServerSentEvent], any Error>, Int?) in
            guard !state.isStopped, state.session === session else { return (.success([]), nil) }
            let parsed = Result { () throws(ServerSentEventParser.EventTooLarge) in try state.parser.push(data) }
            return (parsed.mapError { $0 }, state.parser.retryMilliseconds)
        }
        guard case .success(let events) = parsed else {
            // An oversized event: drop this connection, failing with the parser's error; the policy decides about
            // reconnecting.
            if case .failure(let error) = parsed { state.withLock { $0.statusError = error } }
            return session.invalidateAndCancel()
        }
        if let id = events.last(where: { $0.id != nil })?.id ?? nil {
            memory.withLock { $0.lastEventID = id }
        }
        if let retryHint { memory.withLock { $0.retryHint = .milliseconds(retryHint) } }
        for event in events {
            guard let update = FriendUpdate(event) else { continue }
            observer.send(update)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        session.finishTasksAndInvalidate()
        let failure = state.withLock { state -> (any Error)? in
            guard !state.isStopped, state.session === session else { return nil }
            state.session = nil
            return state.statusError ?? error ?? ServerSentEventsFriendsUpdates.StreamEnded()
        }
        guard let failure else { return }
        onConnectionChange?(.disconnected(error: failure))
        observer.fail(Disconnection(reason: failure, retryAfter: memory.withLock { $0.retryHint }))
    }
}
