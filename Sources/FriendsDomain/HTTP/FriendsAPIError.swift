import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What can go wrong talking to the friends API.
public enum FriendsAPIError: Error, CustomStringConvertible, LocalizedError, RetryAfterError {
    /// The request did not get an answer: no network, a refused or dropped connection, a timeout.
    case connectivity(underlying: any Error)
    /// The server answered with a status the endpoint does not define.
    case unexpectedStatus(Int)
    /// The body was empty, was not valid JSON, or missed a required field.
    case invalidData
    /// The friend to delete does not exist (404).
    case notFound
    /// The id cannot name a friend (it is empty); nothing was sent.
    case invalidID(String)
    /// The server is busy (429 or 503) and said how long to wait (`Retry-After`).
    case busy(status: Int, retryAfter: Duration)
    /// The response body was larger than the client accepts (`limit` bytes); the request was cancelled.
    case responseTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .connectivity(let underlying): "Cannot reach the friends API: \(Self.explain(underlying))."
        case .unexpectedStatus(let code): "The friends API answered with status \(code)."
        case .invalidData: "The friends API sent data that is not a valid friends list."
        case .notFound: "The friend does not exist on the server."
        case .invalidID(let id): "\"\(id)\" is not a valid friend id."
        case .busy(let status, let retryAfter):
            "The friends API is busy (status \(status)); it asks to retry after \(retryAfter)."
        case .responseTooLarge(let limit): "The friends API sent more than the \(ByteCount(limit)) accepted."
        }
    }

    /// How long the server asked to wait, for ``busy(status:retryAfter:)``.
    public var retryAfter: Duration? {
        if case .busy(_, let retryAfter) = self { return retryAfter }
        return nil
    }

    /// Whether another attempt may succeed: connectivity failures (timeouts included), 408, 429 and 5xx. Other 4xx,
    /// invalid data, responses too large and invalid ids are permanent.
    public var isTransient: Bool {
        switch self {
        case .connectivity, .busy: true
        case .unexpectedStatus(let code): code == 408 || code == 429 || (500...599).contains(code)
        case .invalidData, .notFound, .invalidID, .responseTooLarge: false
        }
    }

    /// Whether `error`, from a friends API call, is worth another attempt: a transient ``FriendsAPIError`` or a
    /// timeout; the predicate the composer gives its retry policy.
    public static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? FriendsAPIError { return error.isTransient }
        return error is TimeoutError
    }

    /// The error for a response that is not a success: ``busy(status:retryAfter:)`` for a 429 or 503 that says how
    /// long to wait (in seconds, or as an HTTP date), otherwise ``unexpectedStatus(_:)``.
    static func status(of response: HTTPURLResponse, now: Date = Date()) -> FriendsAPIError {
        let code = response.statusCode
        guard code == 429 || code == 503, let header = response.value(forHTTPHeaderField: "Retry-After") else {
            return .unexpectedStatus(code)
        }
        let text = header.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(text), seconds >= 0 { return .busy(status: code, retryAfter: .seconds(seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: text) else { return .unexpectedStatus(code) }
        return .busy(status: code, retryAfter: .seconds(max(0, date.timeIntervalSince(now).rounded(.up))))
    }

    public var errorDescription: String? { description }

    /// A transport error in words: a URL error by what happened, anything else as it describes itself.
    private static func explain(_ error: any Error) -> String {
        guard let error = error as? URLError else { return String(describing: error) }
        let what: String =
            switch error.code {
            case .timedOut: "the request timed out"
            case .notConnectedToInternet: "there is no network connection"
            case .cannotFindHost, .dnsLookupFailed: "the server's name could not be resolved"
            case .cannotConnectToHost: "the server refused the connection"
            case .networkConnectionLost: "the connection was lost"
            case .cancelled: "the request was cancelled"
            case .secureConnectionFailed: "a secure connection could not be made"
            default: "a network error occurred"
            }
        return "\(what) (URL error \(error.code.rawValue))"
    }
}
