import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// A quote as the upstream sends it; `version` counts the upstream's calls for the symbol.
struct UpstreamQuote: ResponseCodable {
    let symbol: String
    let price: Double
    let version: Int
}

/// The upstream's calls since the last time they were asked for: each symbol with when it was called, in seconds
/// since the upstream started, and who called (the `caller` header, empty without one).
struct CallLog: ResponseCodable {
    var symbols: [String] = []
    var seconds: [Double] = []
    var callers: [String] = []
}

/// An upstream that answers every quote after `latency` (a symbol beginning with `SLOW` after `slowLatency`; one
/// beginning with `UNKNOWN` with a 404; one beginning with `HUNG` never) and keeps a log of its calls (`GET /calls`
/// takes it).
final class FakeUpstream: Sendable {
    private let latency: Duration
    private let slowLatency: Duration
    private let started = ContinuousClock.now
    private let log = NIOLockedValueBox(CallLog())
    private let versions = NIOLockedValueBox<[String: Int]>([:])

    init(latency: Duration, slowLatency: Duration) {
        self.latency = latency
        self.slowLatency = slowLatency
    }

    func run(port: Int) async throws {
        let router = Router()
        router.get("quotes/:symbol") { request, context -> UpstreamQuote in
            let symbol = try context.parameters.require("symbol")
            let version = self.record(symbol, from: request.headers[.init("caller")!] ?? "")
            let latency: Duration =
                symbol.hasPrefix("HUNG") ? .seconds(3_600) : symbol.hasPrefix("SLOW") ? self.slowLatency : self.latency
            try await Task.sleep(for: latency)
            guard !symbol.hasPrefix("UNKNOWN") else { throw HTTPError(.notFound) }
            return UpstreamQuote(symbol: symbol, price: Double(symbol.utf8.count * 10 + version), version: version)
        }
        router.get("calls") { _, _ -> CallLog in
            self.log.withLockedValue { log in
                defer { log = CallLog() }
                return log
            }
        }
        var logger = Logger(label: "fake-upstream")
        logger.logLevel = .warning
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
        try await app.runService()
    }

    private func record(_ symbol: String, from caller: String) -> Int {
        let at = (ContinuousClock.now - started) / .seconds(1)
        log.withLockedValue { log in
            log.symbols.append(symbol)
            log.seconds.append(at)
            log.callers.append(caller)
        }
        return versions.withLockedValue { versions in
            versions[symbol, default: 0] += 1
            return versions[symbol]!
        }
    }
}
