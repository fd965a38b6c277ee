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
public struct URLSessionHTTPClient: HTTPClient {
    /// The response was not an HTTP response.
    public struct UnexpectedResponse: Error, CustomStringConvertible, LocalizedError {
        /// Creates the error.
        public init() {}

        public var description: String { "The response was not an HTTP response." }

        public var errorDescription: String? { description }
    }

    private let session: URLSession

    /// Creates a client that sends requests through `session`.
    public init(session: URLSession) {
        self.session = session
    }

    @discardableResult
    public func perform(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
    ) -> any CancellationToken {
        // The data task reports its own cancellation as an error (-999); the pending load drops it, so a cancelled
        // request never completes.
        let pending = PendingLoad<(Data, HTTPURLResponse)>(completion)
        pending.startStep {
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
