// A quote service: `GET /quotes/{symbol}` answers a quote from an upstream, through a memory level, a PostgreSQL
// table every instance shares and a lease that keeps one upstream call per symbol across the instances.
//
// `--mode store` answers with a `Store` (with `--events on`, its events to swift-metrics and swift-log); `--mode plain`
// takes the same steps written by hand with async/await, over the same two PostgreSQL classes: the baseline the store
// is measured against. `Scripts/quote-load.sh` runs two instances of each and measures them.
//
//     QuoteService --port 8081 --upstream http://127.0.0.1:9000 --postgres postgres://user@127.0.0.1:5432/db \
//         --mode store --table quotes --max-age 5
import AsyncHTTPClient
import Foundation
import Hummingbird
import Loading
import LoadingObservability
import LoadingPostgres
import Logging
import PostgresNIO

let options: ServiceOptions
do {
    options = try ServiceOptions(CommandLine.arguments.dropFirst())
} catch {
    FileHandle.standardError.write(Data("QuoteService: \(error.localizedDescription)\n".utf8))
    exit(2)
}
let logger = Logger(label: "quote-service", level: .warning)
let postgres = PostgresClient(configuration: options.postgresConfiguration, backgroundLogger: logger)
var upstreamConfiguration = HTTPClient.Configuration()
upstreamConfiguration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: upstreamConfiguration)
let upstream = Upstream(
    client: http, base: options.upstream, caller: "\(options.port)", timeout: options.upstreamTimeout)
let quotesTable = try PostgresLevel<String, Quote>(client: postgres, table: options.table, maxAge: options.maxAge)
let quoteLeases = try PostgresFetchLease<String>(client: postgres, table: options.table + "_leases")

let quotes: any QuoteSource =
    switch options.mode {
    case .store: StoreQuotes(table: quotesTable, leases: quoteLeases, upstream: upstream, options: options)
    case .plain: PlainQuotes(table: quotesTable, leases: quoteLeases, upstream: upstream, options: options)
    }

let router = Router()
router.get("quotes/:symbol") { _, context -> Quote in
    try await quotes.quote(try context.parameters.require("symbol"))
}
router.get("health") { _, _ in "ok" }
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: options.port)),
    services: [postgres], logger: logger)
try await app.runService()  // until SIGTERM or SIGINT, then until the requests under way are answered
await quotes.shutDown()
try await http.shutdown().get()

/// A quote, as the upstream and the service send it.
struct Quote: ResponseCodable, Sendable {
    let symbol: String
    let price: Double
    /// How many times the upstream was asked for this symbol when it answered.
    let version: Int
}

/// What answers `GET /quotes/{symbol}`.
protocol QuoteSource: Sendable {
    func quote(_ symbol: String) async throws -> Quote
    /// Lets go of what the instance holds for others (its leases), its server stopped.
    func shutDown() async
}

/// The upstream's quotes over HTTP.
struct Upstream: Sendable {
    let client: HTTPClient
    let base: String
    /// How this instance names itself to the upstream (its port): the upstream's call log says who called.
    let caller: String
    /// How long a call may take.
    let timeout: Duration

    func quote(_ symbol: String) async throws -> Quote {
        var request = HTTPClientRequest(url: "\(base)/quotes/\(symbol)")
        request.headers.add(name: "caller", value: caller)
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .milliseconds(Int64(timeout / .milliseconds(1))))
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            throw UpstreamTimedOut()
        }
        guard response.status != .notFound else { throw UnknownSymbol() }
        guard response.status == .ok else {
            throw HTTPError(.badGateway, message: "The upstream answered \(response.status).")
        }
        let body = try await response.body.collect(upTo: 1 << 16)
        return try JSONDecoder().decode(Quote.self, from: Data(body.readableBytesView))
    }
}

/// The upstream does not know the symbol: a failure that lasts, answered with a 404.
struct UnknownSymbol: HTTPResponseError {
    var status: HTTPResponse.Status { .notFound }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status)
    }
}

/// The upstream did not answer in time: answered with a 504.
struct UpstreamTimedOut: HTTPResponseError {
    var status: HTTPResponse.Status { .gatewayTimeout }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status)
    }
}

/// The service with the library: a store over a memory level and the shared table, its fetches under the lease, an
/// unknown symbol remembered for a freshness window, and that failure and a timed out upstream shared by the
/// instances through the lease for the same window.
struct StoreQuotes: QuoteSource {
    private let store: Store<String, Quote>

    init(
        table: PostgresLevel<String, Quote>, leases: PostgresFetchLease<String>, upstream: Upstream,
        options: ServiceOptions
    ) {
        let metrics = StoreEventMetrics<String>(store: "quotes")
        let log = StoreEventLog<String>(store: "quotes", logger: Logger(label: "quotes", level: .warning))
        let told: @Sendable (StoreEvent<String>) -> Void = { event in
            metrics.record(event)
            log.record(event)
        }
        store = Store(
            levels: [
                .cache(MemoryCache(countLimit: 100_000), name: "memory"),
                .cache(table, name: "postgres", timeout: options.levelTimeout),
            ],
            fetch: LoaderFamily { (symbol: String) in AnyLoader { try await upstream.quote(symbol) } }
                .rememberingFailures(for: options.maxAge, where: { $0 is UnknownSymbol }),
            keptValues: 5_000,
            maxAge: options.maxAge,
            coordination: .lease(
                leases, sharedLevel: "postgres", waiting: options.leaseWait,
                failures: FetchFailureSharing(
                    for: options.maxAge,
                    describe: { error in
                        switch error {
                        case is UnknownSymbol: "unknown symbol"
                        case is UpstreamTimedOut: "upstream timed out"
                        default: nil
                        }
                    },
                    restore: { $0 == "unknown symbol" ? UnknownSymbol() as any Error : UpstreamTimedOut() })),
            events: options.events ? told : nil)
    }

    func quote(_ symbol: String) async throws -> Quote {
        guard let quote = try await store.read(symbol).load().value else { throw HTTPError(.notFound) }
        return quote
    }

    func shutDown() async {
        await store.shutDown(waitingAtMost: .seconds(5))
    }
}

extension Logger {
    init(label: String, level: Logger.Level) {
        self.init(label: label)
        logLevel = level
    }
}
