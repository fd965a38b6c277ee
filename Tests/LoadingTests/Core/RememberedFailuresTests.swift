import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A family remembering its keys' lasting failures for a window: within it, a key's load fails at once with the same
/// error and the upstream is not asked; a passing failure, another key, or the end of the window asks again.
final class RememberedFailuresTests: XCTestCase {
    func test_theDocumentedFamily_asksTheUpstreamOnceForAnUnknownSymbol() {
        let api = SymbolAPI(unknown: ["NOPE"])
        // Sample: begin
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .rememberingFailures(for: .seconds(30), where: { $0 is UnknownSymbol })
        // Sample: end

        XCTAssertThrowsError(try load(quotes["NOPE"]).get())
        XCTAssertThrowsError(try load(quotes["NOPE"]).get())  // within 30 s: a watchdog's time

        XCTAssertEqual(api.calls, ["NOPE"])
    }

    func test_aLastingFailure_isTheAnswerForTheWindow_withoutAskingTheUpstream() throws {
        let api = SymbolAPI(unknown: ["NOPE"])
        let scheduler = TestScheduler()
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .rememberingFailures(for: .seconds(5), where: { $0 is UnknownSymbol }, scheduler: scheduler)

        XCTAssertThrowsError(try load(quotes["NOPE"]).get())
        scheduler.advance(by: .milliseconds(4_999))
        XCTAssertThrowsError(try load(quotes["NOPE"]).get()) { XCTAssertEqual($0 as? UnknownSymbol, UnknownSymbol()) }
        XCTAssertEqual(api.calls, ["NOPE"], "the second load did not ask the upstream")
        XCTAssertEqual(try load(quotes["ACME"]).get(), "quote ACME", "another key is asked")

        scheduler.advance(by: .milliseconds(1))
        XCTAssertThrowsError(try load(quotes["NOPE"]).get())
        XCTAssertEqual(api.calls, ["NOPE", "ACME", "NOPE"], "asked again once the window ended")
    }

    func test_aPassingFailure_isNotRemembered() {
        let api = SymbolAPI(unknown: [], failing: ["BUSY"])
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .rememberingFailures(for: .seconds(5), where: { $0 is UnknownSymbol }, scheduler: TestScheduler())

        XCTAssertThrowsError(try load(quotes["BUSY"]).get())
        XCTAssertThrowsError(try load(quotes["BUSY"]).get())

        XCTAssertEqual(api.calls, ["BUSY", "BUSY"])
    }

    func test_atMostCountLimitFailures_areRemembered_theOldestForgottenFirst() {
        let api = SymbolAPI(unknown: ["A", "B", "C"])
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .rememberingFailures(
                for: .seconds(5), where: { $0 is UnknownSymbol }, countLimit: 2, scheduler: TestScheduler())

        for symbol in ["A", "B", "C", "C", "B", "A"] { _ = load(quotes[symbol]) }

        XCTAssertEqual(api.calls, ["A", "B", "C", "A"], "A, the oldest, was forgotten when C failed")
    }

    func test_aFailureRememberedAgain_isKeptForAWholeWindowFromThen() {
        let api = SymbolAPI(unknown: ["A", "B"])
        let scheduler = TestScheduler()
        let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
            .rememberingFailures(
                for: .seconds(5), where: { $0 is UnknownSymbol }, countLimit: 2, scheduler: scheduler)

        _ = load(quotes["A"])
        scheduler.advance(by: .seconds(5))
        _ = load(quotes["A"])  // A asked again, and remembered again
        scheduler.advance(by: .seconds(1))
        _ = load(quotes["B"])  // B joins: two remembered, none expired
        _ = load(quotes["A"])
        _ = load(quotes["B"])

        XCTAssertEqual(api.calls, ["A", "A", "B"])
    }

    func test_aStoreFetchingThroughIt_asksTheUpstreamOncePerWindow() {
        let api = SymbolAPI(unknown: ["NOPE"])
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in api.quote(symbol) }
                .rememberingFailures(for: .seconds(60), where: { $0 is UnknownSymbol }, scheduler: TestScheduler()))

        for _ in 0..<5 {
            XCTAssertThrowsError(try load(store.read("NOPE")).get()) { XCTAssertTrue($0 is UnknownSymbol) }
        }

        XCTAssertEqual(api.calls, ["NOPE"])
    }

    /// The load's result, waited for under a watchdog.
    private func load<Output: Sendable>(_ loader: some Loader<Output>) -> Result<Output, any Error> {
        let result = Locked<Result<Output, any Error>?>(nil)
        let done = expectation(description: "loaded")
        loader.load { answer in
            result.withLock { $0 = answer }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return result.withLock { $0 } ?? .failure(CancellationError())
    }
}

/// A quotes API answering at once: a quote, `UnknownSymbol` for the symbols it does not know, a timeout for those
/// it is too busy for. It logs the symbols it was asked for.
private final class SymbolAPI: Sendable {
    private let unknown: Set<String>
    private let failing: Set<String>
    private let log = Locked<[String]>([])

    init(unknown: Set<String>, failing: Set<String> = []) {
        self.unknown = unknown
        self.failing = failing
    }

    var calls: [String] { log.withLock { $0 } }

    func quote(_ symbol: String) -> AnyLoader<String> {
        AnyLoader { [self] completion in
            log.withLock { $0.append(symbol) }
            if unknown.contains(symbol) {
                completion(.failure(UnknownSymbol()))
            } else if failing.contains(symbol) {
                completion(.failure(URLError(.timedOut)))
            } else {
                completion(.success("quote \(symbol)"))
            }
            return AnyCancellationToken {}
        }
    }
}
