import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Performs HTTP requests: the seam between the friends API and the network, replaced by a stub in tests.
///
/// Implementations keep the loader contract: `completion` is called exactly once unless the returned token is
/// cancelled first, and no call of it begins after `cancel()` returns; cancelling stops the request.
public protocol HTTPClient: Sendable {
    /// Sends `request` and completes with the body and response, or with the transport error.
    @discardableResult
    func perform(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
    ) -> any CancellationToken
}

/// An ``HTTPClient`` on a `URLSession` (injected, so tests can stub it with a `URLProtocol`).
///
/// A body larger than `maxResponseBytes` fails with ``ResponseTooLarge`` as soon as the limit is passed (a declared
/// `Content-Length` above it, or the bytes received so far), and the request is cancelled: an endless or hostile
/// response never holds more than the limit in memory. To receive it, the client runs the requests on a session of
/// its own, made with `session`'s configuration (its protocol classes, cookies, caches and headers); authentication
/// challenges still go to `session`'s delegate. With `maxResponseBytes: nil`, requests run on `session` itself and
/// bodies have no limit.
///
/// On Linux, FoundationNetworking may go on reading a cancelled response for a while; the client drops what arrives.
/// A loopback server that writes faster than a debug build drains those chunks can still make FoundationNetworking's
/// own queue of them grow.
public struct URLSessionHTTPClient: HTTPClient {
    /// The response was not an HTTP response.
    public struct UnexpectedResponse: Error, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String { "The response was not an HTTP response." }

        public var errorDescription: String? { description }
    }

    /// The response body was larger than the client accepts; the request was cancelled.
    public struct ResponseTooLarge: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// The largest body accepted, in bytes.
        public let limit: Int

        /// Creates the error.
        public init(limit: Int) {
            self.limit = limit
        }

        public var description: String {
            "The response body is larger than the \(ByteCount(limit)) accepted."
        }

        public var errorDescription: String? { description }
    }

    /// The largest body accepted by default: 64 MiB.
    public static let defaultMaxResponseBytes = 64 << 20

    private let session: URLSession
    private let limited: LimitedSession?

    /// Creates a client that sends requests through `session`, accepting bodies of at most `maxResponseBytes`
    /// (`nil`: any size).
    public init(session: URLSession, maxResponseBytes: Int? = URLSessionHTTPClient.defaultMaxResponseBytes) {
        self.session = session
        limited = maxResponseBytes.map { LimitedSession(basedOn: session, limit: $0) }
    }

    @discardableResult
    public func perform(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
    ) -> any CancellationToken {
        // The data task reports its own cancellation as an error (-999); the pending load drops it, so a cancelled
        // request never completes.
        let pending = PendingLoad<(Data, HTTPURLResponse)>(completion)
        pending.startStep { [session, limited] in
            if let limited {
                let task = limited.start(request) { pending.complete($0) }
                return AnyCancellationToken { task.cancel() }
            }
            let task = session.dataTask(with: request) { data, response, error in
                if let error {
                    pending.complete(.failure(error))
                } else if let response = response as? HTTPURLResponse {
                    pending.complete(.success((data ?? Data(), response)))
                } else {
                    pending.complete(.failure(UnexpectedResponse()))
                }
            }
            task.resume()
            return AnyCancellationToken { task.cancel() }
        }
        return pending
    }
}

/// A session of the client's own whose delegate receives bodies chunk by chunk, and stops those that grow past the
/// limit. Released, it lets its tasks finish and lets the session go.
private final class LimitedSession: Sendable {
    private let session: URLSession
    private let receiver: BodyReceiver

    init(basedOn base: URLSession, limit: Int) {
        let receiver = BodyReceiver(limit: limit, challenges: base.delegate as? any URLSessionTaskDelegate)
        self.receiver = receiver
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: base.configuration, delegate: receiver, delegateQueue: queue)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// Starts `request`; `completion` runs once, when it ends.
    func start(
        _ request: URLRequest, completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
    ) -> URLSessionDataTask {
        let task = session.dataTask(with: request)
        receiver.expect(task, completion: completion)
        task.resume()
        return task
    }
}

/// The delegate of a ``LimitedSession``: collects each task's body up to the limit. A body that passes it completes
/// its request at once with ``URLSessionHTTPClient/ResponseTooLarge``; the task is cancelled, and what it still
/// receives is dropped. (It implements no `didReceive response` callback: on Linux, FoundationNetworking then lets a
/// cancelled task read on for gigabytes. Even without it, a cancel there may take a while to stop the transfer, so
/// the limit is kept by dropping, not by the cancel.)
private final class BodyReceiver: NSObject, URLSessionDataDelegate, Sendable {
    private struct Receiving: Sendable {
        let completion: @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
        var body = Data()
    }

    private let limit: Int
    private let challenges: (any URLSessionTaskDelegate)?
    private let tasks = Locked<[Int: Receiving]>([:])

    init(limit: Int, challenges: (any URLSessionTaskDelegate)?) {
        self.limit = limit
        self.challenges = challenges
    }

    func expect(
        _ task: URLSessionTask, completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
    ) {
        tasks.withLock { $0[task.taskIdentifier] = Receiving(completion: completion) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        // What arrives after the limit is dropped here, touching nothing else: the task's own properties wait for
        // FoundationNetworking's busy queue, and a slow delegate lets chunks pile up in memory.
        let (limit, id) = (limit, dataTask.taskIdentifier)
        guard let isFirst = tasks.withLock({ $0[id].map { $0.body.isEmpty } }) else { return }
        let declared = isFirst ? dataTask.response?.expectedContentLength ?? -1 : -1
        let tooLarge = tasks.withLock { tasks -> Receiving? in
            // Taken out while it grows, so that the body has one reference and is appended in place.
            guard var receiving = tasks.removeValue(forKey: id) else { return nil }
            guard declared <= Int64(limit), receiving.body.count + data.count <= limit else { return receiving }
            receiving.body.append(data)
            tasks[id] = receiving
            return nil
        }
        guard let tooLarge else { return }
        DispatchQueue.global().async { dataTask.cancel() }  // not on the delegate queue: it must keep draining
        tooLarge.completion(.failure(URLSessionHTTPClient.ResponseTooLarge(limit: limit)))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let receiving = tasks.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            receiving.completion(.failure(error))
        } else if let response = task.response as? HTTPURLResponse {
            receiving.completion(.success((receiving.body, response)))
        } else {
            receiving.completion(.failure(URLSessionHTTPClient.UnexpectedResponse()))
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let challenges else { return completionHandler(.performDefaultHandling, nil) }
        #if canImport(FoundationNetworking)
            challenges.urlSession(session, task: task, didReceive: challenge, completionHandler: completionHandler)
        #else
            challenges.urlSession?(session, task: task, didReceive: challenge, completionHandler: completionHandler)
                ?? completionHandler(.performDefaultHandling, nil)
        #endif
    }
}
