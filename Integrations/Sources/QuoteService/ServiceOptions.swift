import Foundation
import PostgresNIO

/// The service's command line: `--port`, `--upstream`, `--postgres`, `--mode store|plain`, `--events on|off` (the
/// store's events to swift-metrics and swift-log), `--table`, `--max-age` (seconds), `--level-timeout` (milliseconds
/// a PostgreSQL operation is given), `--lease-wait` (milliseconds an instance waits for the lease holder's value),
/// `--upstream-timeout` (milliseconds an upstream call is given).
struct ServiceOptions {
    enum Mode: String {
        case store, plain
    }

    var port = 8080
    var upstream = "http://127.0.0.1:9000"
    var mode = Mode.store
    var events = true
    var table = "quotes"
    var maxAge = Duration.seconds(5)
    var levelTimeout = Duration.milliseconds(500)
    var leaseWait = Duration.seconds(2)
    var upstreamTimeout = Duration.seconds(5)
    /// The client configuration for `--postgres` (`postgres://user@host:port/database`).
    let postgresConfiguration: PostgresClient.Configuration

    init(_ arguments: some Sequence<String>) throws {
        var postgres = ""
        var remaining = arguments.makeIterator()
        while let name = remaining.next() {
            guard let value = remaining.next() else { throw OptionError("\(name) needs a value.") }
            switch name {
            case "--port": port = try Self.number(value, for: name)
            case "--upstream": upstream = value
            case "--postgres": postgres = value
            case "--mode":
                guard let chosen = Mode(rawValue: value) else { throw OptionError("--mode is store or plain.") }
                mode = chosen
            case "--events":
                guard value == "on" || value == "off" else { throw OptionError("--events is on or off.") }
                events = value == "on"
            case "--table": table = value
            case "--max-age": maxAge = .seconds(try Self.number(value, for: name))
            case "--level-timeout": levelTimeout = .milliseconds(try Self.number(value, for: name))
            case "--lease-wait": leaseWait = .milliseconds(try Self.number(value, for: name))
            case "--upstream-timeout": upstreamTimeout = .milliseconds(try Self.number(value, for: name))
            default: throw OptionError("\(name) is not an option of the quote service.")
            }
        }
        guard let url = URLComponents(string: postgres), let host = url.host else {
            throw OptionError("--postgres needs a URL such as postgres://user@127.0.0.1:5432/database.")
        }
        postgresConfiguration = PostgresClient.Configuration(
            host: host, port: url.port ?? 5432, username: url.user ?? "postgres", password: url.password,
            database: String(url.path.dropFirst()), tls: .disable)
    }

    private static func number(_ text: String, for name: String) throws -> Int {
        guard let number = Int(text), number > 0 else { throw OptionError("\(name) needs a positive number.") }
        return number
    }
}

/// A command line the service cannot run with.
struct OptionError: LocalizedError, CustomStringConvertible {
    let description: String
    var errorDescription: String? { description }

    init(_ description: String) {
        self.description = description
    }
}
