import Foundation
import Loading

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 and a free port, one thread per connection, one request per connection
/// (`Connection: close`). Enough for examples and end-to-end tests, with full control over the socket: a handler
/// can stream a body, drop the connection mid-body, or watch for the client going away.
public final class LoopbackHTTPServer: Sendable {
    /// What the handler learns of a request.
    public struct Request: Sendable {
        /// `GET`, `DELETE`...
        public let method: String
        /// The path, without the query.
        public let path: String
        /// The headers, with lowercased names.
        public let headers: [String: String]
        /// The query's parameters, percent-decoded.
        public var query: [String: String] = [:]
        /// The body (as long as its `Content-Length` says; empty without one).
        public var body = Data()
        /// The path's segments, each percent-decoded on its own (so an encoded `/` stays inside its segment).
        public var segments: [String] = []
    }

    /// Handles one request on its connection's thread; it may block, stream, or drop the connection.
    public typealias Handler = @Sendable (Request, Connection) -> Void

    /// The server's port on 127.0.0.1.
    public let port: Int
    private let listener: Int32
    private let connections = Locked<[Int32: Connection]>([:])
    private let isStopped = Locked(false)

    /// Binds 127.0.0.1 on `port` (0: a free one) and starts accepting connections.
    public init(port requestedPort: Int = 0, handler: @escaping Handler) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(requestedPort).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop(handler) }
        thread.name = "LoopbackHTTPServer.accept"
        thread.start()
    }

    /// `http://127.0.0.1:PORT`.
    public var baseURL: URL {
        URL(string: "http://127.0.0.1:\(port)")!
    }

    /// Stops accepting, and closes every open connection.
    public func stop() {
        guard !isStopped.withLock({ exchange(&$0, true) }) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        let open = connections.withLock { connections in
            defer { connections = [:] }
            return Array(connections.values)
        }
        for element in open { element.drop() }
    }

    private func acceptLoop(_ handler: @escaping Handler) {
        while !isStopped.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            var yes: Int32 = 1
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let connection = Connection(fd: client)
            connections.withLock { $0[client] = connection }
            let thread = Thread { [self] in
                if let request = connection.readRequest() { handler(request, connection) }
                connection.drop()
                connections.withLock { _ = $0.removeValue(forKey: client) }
            }
            thread.start()
        }
    }

    /// One client connection: read the request, then write the response (all at once or streamed).
    public final class Connection: Sendable {
        private let fd: Int32
        private let isClosed = Locked(false)

        init(fd: Int32) {
            self.fd = fd
        }

        /// Writes a whole response with `Content-Length`.
        public func respond(status: Int, headers: [String: String] = [:], body: Data = Data()) {
            var headers = headers
            headers["Content-Length"] = String(body.count)
            _ = writeHead(status: status, headers: headers)
            _ = write(body)
        }

        /// Writes the status line and headers (with `Connection: close`); the body follows with ``write(_:)``.
        @discardableResult
        public func writeHead(status: Int, headers: [String: String]) -> Bool {
            var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nConnection: close\r\n"
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
            head += "\r\n"
            return write(Data(head.utf8))
        }

        /// Writes bytes; `false` when the client is gone.
        @discardableResult
        public func write(_ data: Data) -> Bool {
            guard !isClosed.withLock({ $0 }) else { return false }
            return data.withUnsafeBytes { buffer -> Bool in
                var offset = 0
                while offset < buffer.count {
                    let sent = send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                    if sent <= 0 {
                        if sent < 0, errno == EINTR { continue }
                        return false
                    }
                    offset += sent
                }
                return true
            }
        }

        /// Whether the client still holds the connection open (it has not closed or reset it).
        public var isClientConnected: Bool {
            guard !isClosed.withLock({ $0 }) else { return false }
            var byte: UInt8 = 0
            let peeked = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            if peeked == 0 { return false }
            if peeked < 0 { return errno == EAGAIN || errno == EWOULDBLOCK }
            return true
        }

        /// Closes the connection at once (a response cut short, or a dropped event stream).
        public func drop() {
            guard !isClosed.withLock({ exchange(&$0, true) }) else { return }
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }

        func readRequest() -> Request? {
            var buffer = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 4096)
            let terminator: [UInt8] = [13, 10, 13, 10]
            while buffer.count < 64 * 1024 {
                let count = recv(fd, &chunk, chunk.count, 0)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return nil }
                buffer.append(contentsOf: chunk[0..<count])
                if let end = buffer.firstRange(of: terminator) {
                    guard var request = Self.parse(String(decoding: buffer[..<end.lowerBound], as: UTF8.self))
                    else { return nil }
                    let length = min(Int(request.headers["content-length"] ?? "") ?? 0, 1024 * 1024)
                    var body = Array(buffer[end.upperBound...])
                    while body.count < length {
                        let count = recv(fd, &chunk, chunk.count, 0)
                        if count < 0, errno == EINTR { continue }
                        guard count > 0 else { return nil }
                        body.append(contentsOf: chunk[0..<count])
                    }
                    request.body = Data(body.prefix(length))
                    return request
                }
            }
            return nil
        }

        private static func parse(_ head: String) -> Request? {
            var lines = head.components(separatedBy: "\r\n")
            let parts = lines.removeFirst().split(separator: " ")
            guard parts.count >= 2 else { return nil }
            var headers: [String: String] = [:]
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            let target = String(parts[1])
            let halves = target.split(separator: "?", maxSplits: 1).map(String.init)
            let path = halves.first ?? target
            var request = Request(
                method: String(parts[0]), path: path.removingPercentEncoding ?? path, headers: headers)
            request.segments = path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
            for pair in (halves.count > 1 ? halves[1] : "").split(separator: "&") {
                let field = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).removingPercentEncoding ?? String($0)
                }
                request.query[field[0]] = field.count > 1 ? field[1] : ""
            }
            return request
        }

        private static func reason(_ status: Int) -> String {
            switch status {
            case 200: "OK"
            case 201: "Created"
            case 204: "No Content"
            case 404: "Not Found"
            case 500: "Internal Server Error"
            case 503: "Service Unavailable"
            default: "Status"
            }
        }
    }
}

/// Sets `flag` to `value` and returns what it held.
private func exchange(_ flag: inout Bool, _ value: Bool) -> Bool {
    defer { flag = value }
    return flag
}
