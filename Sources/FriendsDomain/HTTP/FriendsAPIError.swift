/// What can go wrong talking to the friends API.
public enum FriendsAPIError: Error, CustomStringConvertible {
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

    public var description: String {
        switch self {
        case .connectivity(let underlying): "Cannot reach the friends API (\(underlying))."
        case .unexpectedStatus(let code): "The friends API answered with status \(code)."
        case .invalidData: "The friends API sent data that is not a valid friends list."
        case .notFound: "The friend does not exist on the server."
        case .invalidID(let id): "\"\(id)\" is not a valid friend id."
        }
    }
}
