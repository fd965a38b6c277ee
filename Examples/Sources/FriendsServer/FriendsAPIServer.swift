import Foundation
import FriendsDomain
import Loading

/// An embedded friends API on a loopback port, speaking the format FriendsDomain defines (`GET /friends`, optionally
/// `?page=N&per_page=M`, `GET /friends/{id}`, `POST /friends` and `DELETE /friends/{id}` honouring `Idempotency-Key`,
/// `GET /friends/events`
/// as server-sent events), with knobs to make it misbehave the way real servers do: latency, failures, malformed bodies, dropped connections, slowness, refusals.
public final class FriendsAPIServer: Sendable {
    /// How `GET /friends` answers.
    public enum ListBehavior: Sendable {
        /// 200 with the friends.
        case normal
        /// 200 with a body that is not valid JSON.
        case malformedJSON
        /// This status, with a small JSON error body.
        case status(Int)
        /// 200 announcing the full length, then the connection is closed halfway through the body.
        case dropMidBody
        /// Waits up to `seconds` before answering, watching the client; records whether it left first.
        case slow(seconds: Double)
    }

    private struct State: Sendable {
        var friends: [Friend]
        var listBehavior = ListBehavior.normal
        var failuresLeft = 0
        var deleteStatus: Int?
        var latency: Duration
        var listRequests = 0
        var deleteRequests = 0
        var friendRequests = 0
        var eventConnections = 0
        var slowHandlerSawDisconnect = false
        var slowHandlerAnswered = false
        var eventClients: [Int: EventClient] = [:]
        var nextClientID = 0
        /// The deletes applied, in order, with the idempotency key each came with.
        var deletes: [(id: String, key: String?)] = []
        /// The answer given to each idempotency key: a delete sent again with one gets it, and changes nothing.
        var answeredKeys: [String: Int] = [:]
        /// The friend created for each idempotency key: a creation sent again with one gets it, and changes nothing.
        var createdForKeys: [String: Friend] = [:]
        var createRequests = 0
        var nextID = 1
        var renameRequests = 0
        /// The answer given to each rename's idempotency key: a rename sent again with one gets it, and changes
        /// nothing.
        var renamedForKeys: [String: (status: Int, friend: Friend?)] = [:]
    }

    private let state: Locked<State>
    private let server = Locked<LoopbackHTTPServer?>(nil)
    private let lastPort = Locked(0)

    /// Starts the server with `friends`, answering after `latency`, on `port` (0: a free one).
    public init(friends: [Friend], latency: Duration = .milliseconds(40), port: Int = 0) throws {
        state = Locked(State(friends: friends, latency: latency))
        lastPort.withLock { $0 = port }
        try start()
    }

    /// The API's base URL, `http://127.0.0.1:PORT`.
    public var baseURL: URL {
        URL(string: "http://127.0.0.1:\(lastPort.withLock { $0 })")!
    }

    /// Whether the server is accepting connections.
    public var isRunning: Bool {
        server.withLock { $0 != nil }
    }

    // MARK: - Knobs

    /// Replaces the friends the server holds.
    public func setFriends(_ friends: [Friend]) { state.withLock { $0.friends = friends } }
    /// The friends the server holds.
    public var friends: [Friend] { state.withLock { $0.friends } }
    /// How `GET /friends` answers from now on.
    public func setListBehavior(_ behavior: ListBehavior) { state.withLock { $0.listBehavior = behavior } }
    /// The next `count` requests to `GET /friends` answer 500, whatever the behavior.
    public func failNextListRequests(_ count: Int) { state.withLock { $0.failuresLeft = count } }
    /// `DELETE` answers with `status` (nil: 204, or 404 for unknown ids).
    public func setDeleteStatus(_ status: Int?) { state.withLock { $0.deleteStatus = status } }
    /// The delay before each answer.
    public func setLatency(_ latency: Duration) { state.withLock { $0.latency = latency } }

    /// How many `GET /friends` requests arrived.
    public var listRequestCount: Int { state.withLock { $0.listRequests } }
    /// How many `DELETE` requests arrived.
    public var deleteRequestCount: Int { state.withLock { $0.deleteRequests } }
    /// The ids the server deleted, in the order it deleted them (a delete repeated with its idempotency key
    /// appears once).
    public var deletedIDs: [String] { state.withLock { $0.deletes.map(\.id) } }
    /// The idempotency keys of the deletes applied, in order (`nil` for a delete sent without one).
    public var deleteKeys: [String?] { state.withLock { $0.deletes.map(\.key) } }
    /// How many `POST /friends` requests arrived.
    public var createRequestCount: Int { state.withLock { $0.createRequests } }
    /// How many `PATCH /friends/{id}` requests arrived.
    public var renameRequestCount: Int { state.withLock { $0.renameRequests } }
    /// Renames the friend with `id` to `name` on the server, as another device would (its version changes): a rename
    /// made on a device against the older version then meets a conflict. The friend renamed, `nil` for an unknown id.
    @discardableResult
    public func renameOnServer(_ id: String, to name: String) -> Friend? {
        state.withLock { state in
            guard let index = state.friends.firstIndex(where: { $0.id == id }) else { return nil }
            state.friends[index] = Self.renamed(state.friends[index], to: name)
            return state.friends[index]
        }
    }
    /// How many `GET /friends/{id}` requests arrived.
    public var friendRequestCount: Int { state.withLock { $0.friendRequests } }
    /// How many event-stream connections were opened.
    public var eventConnectionCount: Int { state.withLock { $0.eventConnections } }
    /// How many event streams are open now.
    public var openEventStreams: Int { state.withLock { $0.eventClients.count } }
    /// Whether a ``ListBehavior/slow(seconds:)`` handler saw its client leave before it answered.
    public var slowHandlerSawDisconnect: Bool { state.withLock { $0.slowHandlerSawDisconnect } }
    /// Whether a ``ListBehavior/slow(seconds:)`` handler got to answer.
    public var slowHandlerAnswered: Bool { state.withLock { $0.slowHandlerAnswered } }

    /// Applies `update` to the server's list and pushes it to every open event stream.
    public func push(_ update: FriendUpdate) {
        let clients = state.withLock { state in
            state.friends = state.friends.applying(update)
            return Array(state.eventClients.values)
        }
        let frame = Self.frame(for: update)
        for element in clients { element.enqueue(frame) }
    }

    /// Closes every open event stream (the clients should reconnect).
    public func dropEventStreams() {
        let clients = state.withLock { Array($0.eventClients.values) }
        for element in clients { element.drop() }
    }

    /// Stops the server: connections are refused until ``start()``.
    public func stop() {
        server.withLock { server in
            server?.stop()
            server = nil
        }
    }

    /// Starts the server, or restarts it on the port it had.
    public func start() throws {
        let port = lastPort.withLock { $0 }
        let http = try LoopbackHTTPServer(port: port) { [weak self] request, connection in
            self?.handle(request, connection)
        }
        lastPort.withLock { $0 = http.port }
        server.withLock { $0 = http }
    }

    // MARK: - Routes

    private func handle(_ request: LoopbackHTTPServer.Request, _ connection: LoopbackHTTPServer.Connection) {
        switch (request.method, request.segments) {
        case ("GET", ["friends"]) where request.query["page"] != nil: page(request.query, connection)
        case ("GET", ["friends"]): list(connection)
        case ("GET", ["friends", "events"]): events(connection)
        case ("GET", let parts) where parts.count == 2 && parts[0] == "friends": friend(parts[1], connection)
        case ("POST", ["friends"]): create(request.body, key: request.headers["idempotency-key"], connection)
        case ("DELETE", let parts) where parts.count == 2 && parts[0] == "friends":
            delete(parts[1], key: request.headers["idempotency-key"], connection)
        case ("PATCH", let parts) where parts.count == 2 && parts[0] == "friends":
            rename(
                parts[1], request.body, ifMatch: request.headers["if-match"], key: request.headers["idempotency-key"],
                connection)
        default: connection.respond(status: 404)
        }
    }

    private func list(_ connection: LoopbackHTTPServer.Connection) {
        let (behavior, friends, latency, fail) = state.withLock { state in
            state.listRequests += 1
            let fail = state.failuresLeft > 0
            if fail { state.failuresLeft -= 1 }
            return (state.listBehavior, state.friends, state.latency, fail)
        }
        if case .slow(let seconds) = behavior { return slow(seconds, friends, connection) }
        sleep(latency)
        if fail { return connection.respond(status: 500, headers: json, body: Data(#"{"error": "try again"}"#.utf8)) }
        switch behavior {
        case .normal, .slow:
            connection.respond(status: 200, headers: json, body: Self.body(for: friends))
        case .malformedJSON:
            connection.respond(status: 200, headers: json, body: Data(#"{"friends": [{"id": "u1", "name": }"#.utf8))
        case .status(let code):
            connection.respond(status: code, headers: json, body: Data(#"{"error": "unavailable"}"#.utf8))
        case .dropMidBody:
            let body = Self.body(for: friends)
            connection.writeHead(status: 200, headers: json.merging(["Content-Length": String(body.count)]) { $1 })
            connection.write(body.prefix(body.count / 2))
            connection.drop()
        }
    }

    /// `GET /friends/{id}`: the friend, or 404.
    private func friend(_ id: String, _ connection: LoopbackHTTPServer.Connection) {
        let (friend, latency) = state.withLock { state in
            state.friendRequests += 1
            return (state.friends.first { $0.id == id }, state.latency)
        }
        sleep(latency)
        guard let friend, let body = try? Friend.makeEncoder().encode(friend) else {
            return connection.respond(status: 404, headers: json, body: Data(#"{"error": "not found"}"#.utf8))
        }
        connection.respond(status: 200, headers: json, body: body)
    }

    /// `GET /friends?page=N&per_page=M` (pages from 1): that page of the list, in the list's format, with `next_page`
    /// when more follow.
    private func page(_ query: [String: String], _ connection: LoopbackHTTPServer.Connection) {
        let friends = state.withLock { state in
            state.listRequests += 1
            return state.friends
        }
        let page = max(Int(query["page"] ?? "") ?? 1, 1)
        let size = max(Int(query["per_page"] ?? "") ?? 20, 1)
        let start = min((page - 1) * size, friends.count)
        let end = min(start + size, friends.count)
        connection.respond(
            status: 200, headers: json,
            body: Self.body(for: Array(friends[start..<end]), nextPage: end < friends.count ? page + 1 : nil))
    }

    private func slow(_ seconds: Double, _ friends: [Friend], _ connection: LoopbackHTTPServer.Connection) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard connection.isClientConnected else {
                state.withLock { $0.slowHandlerSawDisconnect = true }
                return
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        state.withLock { $0.slowHandlerAnswered = true }
        connection.respond(status: 200, headers: json, body: Self.body(for: friends))
    }

    /// `POST /friends` with `{"name": …}`: 201 with the friend created (its id `n1`, `n2`…), or 400 for a body
    /// without a name; a request with an `Idempotency-Key` already answered gets the same friend and changes nothing.
    private func create(_ body: Data, key: String?, _ connection: LoopbackHTTPServer.Connection) {
        struct Creation: Decodable { let name: String }
        let name = (try? JSONDecoder().decode(Creation.self, from: body))?.name
        let (latency, created) = state.withLock { state -> (Duration, Friend?) in
            state.createRequests += 1
            if let key, let created = state.createdForKeys[key] { return (state.latency, created) }
            guard let name, !name.isEmpty else { return (state.latency, nil) }
            let friend = Friend(id: "n\(state.nextID)", name: name, status: .offline, updatedAt: Date())
            state.nextID += 1
            state.friends.append(friend)
            if let key { state.createdForKeys[key] = friend }
            return (state.latency, friend)
        }
        sleep(latency)
        guard let created, let body = try? Friend.makeEncoder().encode(created) else {
            let error = Data(#"{"error": "a friend needs a name"}"#.utf8)
            return connection.respond(status: 400, headers: json, body: error)
        }
        connection.respond(status: 201, headers: json, body: body)
    }

    /// `DELETE /friends/{id}`: 204, or 404 for an unknown id; a request with an `Idempotency-Key` already answered
    /// gets that answer again and changes nothing.
    private func delete(_ id: String, key: String?, _ connection: LoopbackHTTPServer.Connection) {
        let (latency, status) = state.withLock { state -> (Duration, Int) in
            state.deleteRequests += 1
            if let key, let answered = state.answeredKeys[key] { return (state.latency, answered) }
            let status: Int
            if let forced = state.deleteStatus {
                status = forced
            } else if state.friends.contains(where: { $0.id == id }) {
                state.friends.removeAll { $0.id == id }
                state.deletes.append((id, key))
                status = 204
            } else {
                status = 404
            }
            if let key { state.answeredKeys[key] = status }
            return (state.latency, status)
        }
        sleep(latency)
        connection.respond(status: status)
    }

    /// `PATCH /friends/{id}` with `{"name": …}`: 200 with the renamed friend; 409 with the server's friend when
    /// `If-Match` names another version of it (renamed elsewhere since); 404 for an unknown id, 400 without a name. A
    /// request with an `Idempotency-Key` already answered gets that answer again and changes nothing.
    private func rename(
        _ id: String, _ body: Data, ifMatch: String?, key: String?, _ connection: LoopbackHTTPServer.Connection
    ) {
        struct Rename: Decodable { let name: String }
        let name = (try? JSONDecoder().decode(Rename.self, from: body))?.name
        let (latency, status, friend) = state.withLock { state -> (Duration, Int, Friend?) in
            state.renameRequests += 1
            if let key, let answered = state.renamedForKeys[key] {
                return (state.latency, answered.status, answered.friend)
            }
            var answer: (status: Int, friend: Friend?) = (404, nil)
            if let index = state.friends.firstIndex(where: { $0.id == id }) {
                let current = state.friends[index]
                if let ifMatch, ifMatch != current.entityTag {
                    answer = (409, current)
                } else if let name, !name.isEmpty {
                    state.friends[index] = Self.renamed(current, to: name)
                    answer = (200, state.friends[index])
                } else {
                    answer = (400, nil)
                }
            }
            if let key { state.renamedForKeys[key] = answer }
            return (state.latency, answer.status, answer.friend)
        }
        sleep(latency)
        guard let friend, let body = try? Friend.makeEncoder().encode(friend) else {
            return connection.respond(status: status)
        }
        connection.respond(status: status, headers: json, body: body)
    }

    /// `friend` named `name`, as a new version: dated now, and always after the version it replaces.
    private static func renamed(_ friend: Friend, to name: String) -> Friend {
        var renamed = friend
        renamed.name = name
        renamed.updatedAt = max(Date(), friend.updatedAt.addingTimeInterval(0.001))
        return renamed
    }

    private func events(_ connection: LoopbackHTTPServer.Connection) {
        let client = EventClient()
        let id = state.withLock { state in
            state.eventConnections += 1
            state.nextClientID += 1
            state.eventClients[state.nextClientID] = client
            return state.nextClientID
        }
        defer { _ = state.withLock { $0.eventClients.removeValue(forKey: id) } }
        guard
            connection.writeHead(
                status: 200, headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-cache"]),
            connection.write(Data(": connected\n\n".utf8))
        else { return }
        while true {
            switch client.next(timeout: 1) {
            case .frames(let frames):
                for frame in frames where !connection.write(frame) { return }
            case .idle:
                guard connection.write(Data(": heartbeat\n\n".utf8)) else { return }
            case .dropped:
                return connection.drop()
            }
        }
    }

    // MARK: - Encoding

    private let json = ["Content-Type": "application/json"]

    static func body(for friends: [Friend], nextPage: Int? = nil) -> Data {
        let list = (try? Friend.makeEncoder().encode(friends)) ?? Data("[]".utf8)
        let next = nextPage.map { #", "next_page": \#($0)"# } ?? ""
        return Data(#"{"friends": "#.utf8) + list + Data((next + "}").utf8)
    }

    static func frame(for update: FriendUpdate) -> Data {
        switch update {
        case .upsert(let friend):
            let data = (try? Friend.makeEncoder().encode(friend)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            return Data("event: upsert\ndata: \(data)\n\n".utf8)
        case .remove(let id):
            return Data("event: remove\ndata: {\"id\": \"\(id)\"}\n\n".utf8)
        }
    }

    private func sleep(_ duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
    }
}

/// The queue of frames waiting for one event-stream connection.
private final class EventClient: Sendable {
    enum Next {
        case frames([Data])
        case idle
        case dropped
    }

    private let queue = Locked<(frames: [Data], dropped: Bool)>(([], false))
    private let signal = DispatchSemaphore(value: 0)

    func enqueue(_ frame: Data) {
        queue.withLock { $0.frames.append(frame) }
        signal.signal()
    }

    func drop() {
        queue.withLock { $0.dropped = true }
        signal.signal()
    }

    func next(timeout: Double) -> Next {
        let signalled = signal.wait(timeout: .now() + timeout) == .success
        return queue.withLock { queue in
            if queue.dropped { return .dropped }
            guard !queue.frames.isEmpty else { return signalled ? .frames([]) : .idle }
            defer { queue.frames = [] }
            return .frames(queue.frames)
        }
    }
}
