import Foundation
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Loads friends from the API: `GET {baseURL}/friends`, mapped to friends or a ``FriendsAPIError``.
///
/// ```swift
/// let remote = RemoteFriendsLoader(baseURL: api, client: URLSessionHTTPClient(session: .shared))
/// ```
/// 200 with a valid body gives the friends; any other status gives ``FriendsAPIError/unexpectedStatus(_:)``; an
/// empty, malformed or incomplete body gives ``FriendsAPIError/invalidData``; a transport failure gives
/// ``FriendsAPIError/connectivity(underlying:)``. Cancelling cancels the request.
public struct RemoteFriendsLoader: Loader {
    private let url: URL
    private let client: any HTTPClient

    /// Creates a loader for the API at `baseURL`.
    public init(baseURL: URL, client: any HTTPClient) {
        url = baseURL.appendingPathComponent("friends")
        self.client = client
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<[Friend]>) -> any CancellationToken {
        var request = URLRequest(url: url)
        request.httpMethod = "GET"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return client.perform(request) { result in
            completion(
                result
                    .mapError { FriendsAPIError.connectivity(underlying: $0) }
                    .flatMap { data, response in Self.map(data, response) })
        }
    }

    private struct Payload: Decodable {
        let friends: [Friend]
    }

    static func map(_ data: Data, _ response: HTTPURLResponse) -> Result<[Friend], any Error> {
        guard response.statusCode == 200 else { return .failure(FriendsAPIError.unexpectedStatus(response.statusCode)) }
        guard let payload = try? Friend.makeDecoder().decode(Payload.self, from: data) else {
            return .failure(FriendsAPIError.invalidData)
        }
        return .success(payload.friends)
    }
}

/// Deletes friends through the API: `DELETE {baseURL}/friends/{id}`.
public struct RemoteFriendsDeleter: Sendable {
    private let baseURL: URL
    private let client: any HTTPClient

    /// Creates a deleter for the API at `baseURL`.
    public init(baseURL: URL, client: any HTTPClient) {
        self.baseURL = baseURL
        self.client = client
    }

    /// Deletes the friend with `id`: success on 204, ``FriendsAPIError/notFound`` on 404, otherwise
    /// ``FriendsAPIError/unexpectedStatus(_:)`` or ``FriendsAPIError/connectivity(underlying:)``.
    @discardableResult
    public func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
    {
        var request = URLRequest(url: baseURL.appendingPathComponent("friends").appendingPathComponent(id))
        request.httpMethod = "DELETE"
        return client.perform(request) { result in
            switch result {
            case .failure(let error): completion(.failure(FriendsAPIError.connectivity(underlying: error)))
            case .success((_, let response)) where response.statusCode == 204: completion(.success(()))
            case .success((_, let response)) where response.statusCode == 404:
                completion(.failure(FriendsAPIError.notFound))
            case .success((_, let response)):
                completion(.failure(FriendsAPIError.unexpectedStatus(response.statusCode)))
            }
        }
    }

    /// Deletes the friend with `id`, with async/await.
    public func delete(id: Friend.ID) async throws {
        try await AnyLoader<Void> { completion in delete(id: id, completion: completion) }.load()
    }
}
