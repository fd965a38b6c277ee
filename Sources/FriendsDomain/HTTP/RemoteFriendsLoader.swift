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
/// 200 with a valid body gives the friends (one per id: a repeated id's last occurrence wins, see
/// `deduplicatedByID()`); any other status gives ``FriendsAPIError/unexpectedStatus(_:)``; an
/// empty, malformed or incomplete body gives ``FriendsAPIError/invalidData``; a body larger than the client accepts
/// gives ``FriendsAPIError/responseTooLarge(limit:)``; a transport failure gives
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
        return client.getJSON(url, mapping: Self.map, completion: completion)
    }

    private struct Payload: Decodable {
        let friends: [Friend]
    }

    static func map(_ data: Data, _ response: HTTPURLResponse) -> Result<[Friend], any Error> {
        guard response.statusCode == 200 else { return .failure(FriendsAPIError.status(of: response)) }
        guard let payload = try? Friend.makeDecoder().decode(Payload.self, from: data) else {
            return .failure(FriendsAPIError.invalidData)
        }
        return .success(payload.friends.deduplicatedByID())
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
    ///
    /// The id is sent as exactly one path segment, percent-encoded (`/`, `.` and `..` included), so no id can
    /// address another resource. An empty id fails with ``FriendsAPIError/invalidID(_:)`` before any request.
    @discardableResult
    public func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
    {
        delete(id: id, idempotencyKey: nil, completion: completion)
    }

    /// Deletes the friend with `id`, sending `idempotencyKey` in the `Idempotency-Key` header (when given): a server
    /// that honours it applies a delete sent again with the same key once, and answers it as it did the first time.
    @discardableResult
    public func delete(
        id: Friend.ID, idempotencyKey: String?, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> any CancellationToken {
        guard let url = FriendURL.make(for: id, in: baseURL) else {
            completion(.failure(FriendsAPIError.invalidID(id)))
            return AnyCancellationToken {}
        }
        var request = URLRequest(url: url)
        request.httpMethod = "DELETE"
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        return client.perform(request) { result in
            switch result {
            case .failure(let error): completion(.failure(FriendsAPIError.transport(error)))
            case .success((_, let response)) where response.statusCode == 204: completion(.success(()))
            case .success((_, let response)) where response.statusCode == 404:
                completion(.failure(FriendsAPIError.notFound))
            case .success((_, let response)):
                completion(.failure(FriendsAPIError.status(of: response)))
            }
        }
    }

    /// Deletes the friend with `id`, with async/await.
    public func delete(id: Friend.ID) async throws {
        try await AnyLoader<Void> { completion in delete(id: id, completion: completion) }.load()
    }
}

/// Creates friends through the API: `POST {baseURL}/friends` with `{"name": …}`, answered `201` with the friend the
/// server made (its id is the server's).
///
/// ```swift
/// let creator = RemoteFriendsCreator(baseURL: api, client: URLSessionHTTPClient(session: .shared))
/// ```
public struct RemoteFriendsCreator: Sendable {
    private let url: URL
    private let client: any HTTPClient

    /// Creates a creator for the API at `baseURL`.
    public init(baseURL: URL, client: any HTTPClient) {
        url = baseURL.appendingPathComponent("friends")
        self.client = client
    }

    /// Creates a friend named `name`, sending `idempotencyKey` in the `Idempotency-Key` header: a server that
    /// honours it creates one friend for a creation sent twice, and answers the second as the first. Success on 201
    /// with the friend; a 201 whose body is not a friend is ``FriendsAPIError/invalidData``; any other status
    /// ``FriendsAPIError/unexpectedStatus(_:)``; a transport failure ``FriendsAPIError/connectivity(underlying:)``.
    @discardableResult
    public func create(
        named name: String, idempotencyKey: String?,
        completion: @escaping @Sendable (Result<Friend, any Error>) -> Void
    ) -> any CancellationToken {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        request.httpBody = try? JSONEncoder().encode(["name": name])
        return client.perform(request) { result in
            completion(
                result.mapError(FriendsAPIError.transport).flatMap { data, response in
                    guard response.statusCode == 201 else { return .failure(FriendsAPIError.status(of: response)) }
                    guard let friend = try? Friend.makeDecoder().decode(Friend.self, from: data) else {
                        return .failure(FriendsAPIError.invalidData)
                    }
                    return .success(friend)
                })
        }
    }
}

/// Renames friends through the API: `PATCH {baseURL}/friends/{id}` with `{"name": …}` and `If-Match` carrying the
/// version the rename was made against; answered `200` with the renamed friend, or `409` with the server's friend
/// when it changed since.
///
/// ```swift
/// let renamer = RemoteFriendsRenamer(baseURL: api, client: URLSessionHTTPClient(session: .shared))
/// ```
public struct RemoteFriendsRenamer: Sendable {
    private let baseURL: URL
    private let client: any HTTPClient

    /// Creates a renamer for the API at `baseURL`.
    public init(baseURL: URL, client: any HTTPClient) {
        self.baseURL = baseURL
        self.client = client
    }

    /// Sends `rename`, with `idempotencyKey` in the `Idempotency-Key` header (when given): success on 200 with the
    /// renamed friend; ``FriendRenameConflict`` on 409 or 412 with the server's friend; ``FriendsAPIError/notFound``
    /// on 404; ``FriendsAPIError/invalidData`` for a body that is not a friend; otherwise
    /// ``FriendsAPIError/unexpectedStatus(_:)`` or ``FriendsAPIError/connectivity(underlying:)``.
    @discardableResult
    public func rename(
        _ rename: FriendRename, idempotencyKey: String?,
        completion: @escaping @Sendable (Result<Friend, any Error>) -> Void
    ) -> any CancellationToken {
        guard let url = FriendURL.make(for: rename.friendID, in: baseURL) else {
            completion(.failure(FriendsAPIError.invalidID(rename.friendID)))
            return AnyCancellationToken {}
        }
        var request = URLRequest(url: url)
        request.httpMethod = "PATCH"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let seen = Friend(id: rename.friendID, name: rename.name, status: .offline, updatedAt: rename.basedOn)
        request.setValue(seen.entityTag, forHTTPHeaderField: "If-Match")
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        request.httpBody = try? JSONEncoder().encode(["name": rename.name])
        return client.perform(request) { result in
            completion(
                result.mapError(FriendsAPIError.transport).flatMap { data, response in
                    let friend = try? Friend.makeDecoder().decode(Friend.self, from: data)
                    switch response.statusCode {
                    case 200: return friend.map { .success($0) } ?? .failure(FriendsAPIError.invalidData)
                    case 409, 412:
                        return .failure(friend.map { FriendRenameConflict(current: $0) } ?? FriendsAPIError.invalidData)
                    case 404: return .failure(FriendsAPIError.notFound)
                    default: return .failure(FriendsAPIError.status(of: response))
                    }
                })
        }
    }
}

/// Loads one page of the friends list: `GET {baseURL}/friends?page=N&per_page=M` (pages from 1), whose body is the
/// list's format with `next_page` when more follow.
///
/// ```swift
/// let second = RemoteFriendsPageLoader(page: 2, baseURL: api, client: URLSessionHTTPClient(session: .shared))
/// ```
/// Its statuses, bodies and transport failures map as for ``RemoteFriendsLoader``. Without `next_page`, a full page
/// is taken as followed by another, a short one as the last.
public struct RemoteFriendsPageLoader: Loader {
    private let url: URL
    private let page: Int
    private let perPage: Int
    private let client: any HTTPClient

    /// Creates a loader of page `page` (from 1) of `perPage` friends, from the API at `baseURL`.
    public init(page: Int, perPage: Int = 20, baseURL: URL, client: any HTTPClient) {
        self.page = max(page, 1)
        self.perPage = max(perPage, 1)
        var components = URLComponents(url: baseURL.appendingPathComponent("friends"), resolvingAgainstBaseURL: false)
        components?.queryItems = [
            URLQueryItem(name: "page", value: String(self.page)),
            URLQueryItem(name: "per_page", value: String(self.perPage)),
        ]
        url = components?.url ?? baseURL
        self.client = client
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Page<Friend, Int>>) -> any CancellationToken {
        let (page, perPage) = (page, perPage)
        return client.getJSON(url, mapping: { Self.map($0, $1, page: page, perPage: perPage) }, completion: completion)
    }

    private struct Payload: Decodable {
        let friends: [Friend]
        let nextPage: Int?

        enum CodingKeys: String, CodingKey {
            case friends
            case nextPage = "next_page"
        }
    }

    static func map(_ data: Data, _ response: HTTPURLResponse, page: Int, perPage: Int) -> Result<
        Page<Friend, Int>, any Error
    > {
        guard response.statusCode == 200 else { return .failure(FriendsAPIError.status(of: response)) }
        guard let payload = try? Friend.makeDecoder().decode(Payload.self, from: data) else {
            return .failure(FriendsAPIError.invalidData)
        }
        let next = payload.nextPage ?? (payload.friends.count < perPage ? nil : page + 1)
        return .success(Page(items: payload.friends.deduplicatedByID(), nextCursor: next))
    }
}

/// Loads one friend from the API: `GET {baseURL}/friends/{id}`.
///
/// ```swift
/// let ada = RemoteFriendLoader(id: "u1", baseURL: api, client: URLSessionHTTPClient(session: .shared))
/// ```
/// 200 with a valid friend gives it; 404 gives ``FriendsAPIError/notFound``; other statuses, bodies and transport
/// failures map as for ``RemoteFriendsLoader``. The id is sent as one percent-encoded path segment; an empty id fails
/// with ``FriendsAPIError/invalidID(_:)`` before any request. Cancelling cancels the request.
public struct RemoteFriendLoader: Loader {
    private let id: Friend.ID
    private let url: URL?
    private let client: any HTTPClient

    /// Creates a loader of the friend with `id` from the API at `baseURL`.
    public init(id: Friend.ID, baseURL: URL, client: any HTTPClient) {
        self.id = id
        url = FriendURL.make(for: id, in: baseURL)
        self.client = client
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Friend>) -> any CancellationToken {
        guard let url else {
            completion(.failure(FriendsAPIError.invalidID(id)))
            return AnyCancellationToken {}
        }
        return client.getJSON(url, mapping: Self.map, completion: completion)
    }

    static func map(_ data: Data, _ response: HTTPURLResponse) -> Result<Friend, any Error> {
        if response.statusCode == 404 { return .failure(FriendsAPIError.notFound) }
        guard response.statusCode == 200 else { return .failure(FriendsAPIError.status(of: response)) }
        guard let friend = try? Friend.makeDecoder().decode(Friend.self, from: data) else {
            return .failure(FriendsAPIError.invalidData)
        }
        return .success(friend)
    }
}

/// The URL of one friend.
enum FriendURL {
    /// `{baseURL}/friends/{id}` with `id` as one percent-encoded segment; `nil` for an empty id.
    static func make(for id: Friend.ID, in baseURL: URL) -> URL? {
        guard !id.isEmpty else { return nil }
        // Only unreserved characters stay as they are; `.` is encoded too, so that `.` and `..` are plain names.
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~".utf8)
        var segment = ""
        for byte in id.utf8 {
            if unreserved.contains(byte) {
                segment.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                segment += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        let base = baseURL.appendingPathComponent("friends").absoluteString
        return URL(string: base + "/" + segment)
    }
}

extension HTTPClient {
    /// `GET url` asking for JSON; a transport failure is ``FriendsAPIError/connectivity(underlying:)``, a response is
    /// what `map` makes of it.
    fileprivate func getJSON<Output>(
        _ url: URL,
        mapping map: @escaping @Sendable (Data, HTTPURLResponse) -> Result<Output, any Error>,
        completion: @escaping LoadCompletion<Output>
    ) -> any CancellationToken {
        var request = URLRequest(url: url)
        request.httpMethod = "GET"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return perform(request) { result in
            completion(
                result
                    .mapError(FriendsAPIError.transport)
                    .flatMap { data, response in map(data, response) })
        }
    }
}

extension FriendsAPIError {
    /// The error for a request that got no usable answer from the client: too large, or no answer at all.
    fileprivate static func transport(_ error: any Error) -> FriendsAPIError {
        if let tooLarge = error as? URLSessionHTTPClient.ResponseTooLarge {
            return .responseTooLarge(limit: tooLarge.limit)
        }
        return .connectivity(underlying: error)
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(length - count, 0)) + self
    }
}
