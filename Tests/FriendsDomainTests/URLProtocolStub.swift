import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Intercepts every request of a session made with ``makeSession()``: answers with the stubbed response, records
/// the request, and records when the system stops a request (cancellation).
final class URLProtocolStub: URLProtocol {
    enum Stub: Sendable {
        case response(status: Int, body: Data, headers: [String: String]? = nil)
        case failure(URLError.Code)
        /// Answers 200 and sends the body in these chunks, then ends the response.
        case chunks([Data])
        /// Never answers, so a test can cancel the request in flight.
        case hang
    }

    private struct State: Sendable {
        var stub: Stub = .hang
        /// Stubs for one HTTP method, before ``stub``.
        var byMethod: [String: Stub] = [:]
        var requests: [URLRequest] = []
        var stoppedRequests = 0
    }

    private static let state = Locked(State())

    static func stub(_ stub: Stub) {
        state.withLock { $0.stub = stub }
    }

    /// Answers requests with `method` (`POST`, `DELETE`…) with `stub`, the others as before.
    static func stub(_ stub: Stub, forMethod method: String) {
        state.withLock { $0.byMethod[method] = stub }
    }

    static func reset() {
        state.withLock { $0 = State() }
    }

    static var requests: [URLRequest] { state.withLock { $0.requests } }
    static var stoppedRequests: Int { state.withLock { $0.stoppedRequests } }

    static func makeSession() -> URLSession {
        URLSession(configuration: makeConfiguration())
    }

    static func makeConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [URLProtocolStub.self]
        return configuration
    }

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let stub = Self.state.withLock { state -> Stub in
            state.requests.append(request)
            return request.httpMethod.flatMap { state.byMethod[$0] } ?? state.stub
        }
        switch stub {
        case .response(let status, let body, let headers):
            let response = HTTPURLResponse(
                url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: body)
            client?.urlProtocolDidFinishLoading(self)
        case .failure(let code):
            client?.urlProtocol(self, didFailWithError: URLError(code))
        case .chunks(let chunks):
            let response = HTTPURLResponse(
                url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: nil)!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            for chunk in chunks { client?.urlProtocol(self, didLoad: chunk) }
            client?.urlProtocolDidFinishLoading(self)
        case .hang:
            break
        }
    }

    override func stopLoading() {
        Self.state.withLock { $0.stoppedRequests += 1 }
    }
}
