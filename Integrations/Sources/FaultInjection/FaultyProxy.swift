import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP proxy on loopback in front of a server (a real PostgreSQL), which a test or a fault run turns faulty: it
/// passes every message on, delays each one, swallows them all (a database that hangs), or stops (connections
/// refused, the open ones dropped), as a database in production does. Blocking sockets, one thread per direction of
/// each connection.
public final class FaultyProxy: Sendable {
    /// What the proxy does with the messages of both directions.
    public enum Behaviour: Sendable, Equatable {
        /// Each message goes on at once.
        case passing
        /// Each message goes on after this delay.
        case delaying(Duration)
        /// No message goes on, and the connections stay open: a database that hangs (what it swallowed is lost, so
        /// the connections are of no use afterwards).
        case hanging
    }

    /// The loopback port a client connects to instead of the server's.
    public let port: Int
    private let server: (host: String, port: Int)
    private let listener: Int32
    private let state = NIOLockedValueBox(State())

    private struct State {
        var behaviour = Behaviour.passing
        var stopped = false
        var sockets: Set<Int32> = []
    }

    /// Listens on loopback port `listening` (a free one when zero), in front of the server at `host`:`port`.
    public init(host: String, port: Int, listeningOn listening: Int = 0) throws {
        server = (host, port)
        let listener = socket(AF_INET, Self.streamType, 0)
        guard listener >= 0 else { throw ProxyError(step: "socket") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: listening)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound, listen(listener, 64) == 0 else {
            close(listener)
            throw ProxyError(step: "bind")
        }
        self.listener = listener
        self.port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptConnections() }
    }

    deinit {
        close(listener)
    }

    /// What the proxy does from now on with every message, on every connection.
    public func behave(_ behaviour: Behaviour) {
        state.withLockedValue { $0.behaviour = behaviour }
    }

    /// Stops, as a database does: new connections are refused, the open ones dropped. For good.
    public func stop() {
        let sockets = state.withLockedValue { state -> Set<Int32> in
            state.stopped = true
            return state.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))  // wakes the accepting thread
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    // MARK: Passing messages on

    private func acceptConnections() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return  // stopped
            }
            guard let upstream = connectToServer() else {
                close(client)
                continue
            }
            guard register([client, upstream]) else {
                close(client)
                close(upstream)
                return
            }
            Thread.detachNewThread { [self] in pump(from: client, to: upstream) }
            Thread.detachNewThread { [self] in pump(from: upstream, to: client) }
        }
    }

    /// Keeps `sockets` to drop them on a stop; `false` once stopped.
    private func register(_ sockets: [Int32]) -> Bool {
        state.withLockedValue { state in
            guard !state.stopped else { return false }
            state.sockets.formUnion(sockets)
            return true
        }
    }

    private func connectToServer() -> Int32? {
        let upstream = socket(AF_INET, Self.streamType, 0)
        guard upstream >= 0 else { return nil }
        var address = Self.loopback(port: server.port)
        inet_pton(AF_INET, server.host == "localhost" ? "127.0.0.1" : server.host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(upstream)
            return nil
        }
        return upstream
    }

    /// Passes what `source` sends on to `destination`, as the behaviour of the moment says, until either closes;
    /// then closes both (the other direction's thread finds them closed).
    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            switch state.withLockedValue({ $0.behaviour }) {
            case .passing: break
            case .delaying(let delay): Thread.sleep(forTimeInterval: delay / .seconds(1))
            case .hanging: continue
            }
            guard sendAll(buffer[..<count], to: destination) else { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
        let last = state.withLockedValue { state -> Bool in
            // The second direction to end closes both.
            let last = !state.sockets.contains(source) || !state.sockets.contains(destination)
            state.sockets.remove(source)
            state.sockets.remove(destination)
            return last
        }
        if last {
            close(source)
            close(destination)
        }
    }

    private func sendAll(_ bytes: ArraySlice<UInt8>, to destination: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(destination, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    #if canImport(Glibc)
        private static let streamType = Int32(SOCK_STREAM.rawValue)
    #else
        private static let streamType = SOCK_STREAM
    #endif
}

/// The proxy could not take its loopback port.
public struct ProxyError: Error, CustomStringConvertible {
    /// What the proxy was doing: "socket", "bind".
    public let step: String
    /// The system's error number.
    public let code = errno

    public var description: String { "The faulty proxy could not \(step) its loopback socket (errno \(code))." }
}
