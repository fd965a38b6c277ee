import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

// The Bridging article's recipes, as written there, with the APIs they bridge.

struct Forecast: Sendable, Equatable {
    var city: String
    var degrees: Int
}

/// A callback client: answers when the test says so (``answerAll()``), and cancelled requests answer all the same
/// (as many do).
final class WeatherClient: Sendable {
    final class Request: Sendable {
        private let cancelled = Locked(false)
        var isCancelled: Bool { cancelled.withLock { $0 } }
        func cancel() { cancelled.withLock { $0 = true } }
    }

    private let answers = Locked<[@Sendable () -> Void]>([])

    func forecast(for city: String, completion: @escaping @Sendable (Result<Forecast, any Error>) -> Void) -> Request {
        answers.withLock { $0.append { completion(.success(Forecast(city: city, degrees: 21))) } }
        return Request()
    }

    /// Answers every request asked so far, in order, on a queue of its own.
    func answerAll() {
        let answers = answers.withLock { answers in
            defer { answers = [] }
            return answers
        }
        DispatchQueue.global().async {
            for answer in answers { answer() }
        }
    }
}

/// An async client.
struct Weather: Sendable {
    func forecast(for city: String) async throws -> Forecast {
        await Task.yield()  // it suspends, as a network call would
        return Forecast(city: city, degrees: 19)
    }
}

/// A parser that is not Sendable (it keeps a mutable buffer).
final class LegacyForecastParser {
    private var parsed = 0

    func parse(_ data: Data) throws -> Forecast {
        parsed += 1
        guard let text = String(data: data, encoding: .utf8), let degrees = Int(text) else {
            throw CocoaError(.coderReadCorrupt)
        }
        return Forecast(city: "Paris", degrees: degrees)
    }
}

protocol ScannerDelegate: AnyObject {
    func scanner(didRead code: String)
    func scanner(didFailWith error: any Error)
}

/// A scanner reporting through a closure.
final class BarcodeScanner: Sendable {
    private let handler = Locked<(@Sendable (String) -> Void)?>(nil)
    var onRead: (@Sendable (String) -> Void)? {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }
    func read(_ code: String) { onRead?(code) }
}

struct QuotesAPI: Sendable {
    func quotes() -> AnyLoader<[String]> {
        AnyLoader { completion in
            completion(.success(["Simplicity is prerequisite for reliability."]))
            return AnyCancellationToken {}
        }
    }
}

// Sample: begin
struct ForecastLoader: Loader {
    let client: WeatherClient
    let city: String

    func load(completion: @escaping LoadCompletion<Forecast>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        pending.startStep {
            let request = client.forecast(for: city) { result in pending.complete(result) }
            return AnyCancellationToken { request.cancel() }
        }
        return pending
    }
}
// Sample: end

// Sample: begin
actor ForecastService {
    private let parser = LegacyForecastParser()  // not Sendable: it never leaves the actor

    func forecast(from data: Data) throws -> Forecast {
        try parser.parse(data)
    }
}
// Sample: end

// Sample: begin
@MainActor final class LocationProvider {
    var city = "Paris"
}

@MainActor func makeCityLoader() -> AnyLoader<String> {
    let provider = LocationProvider()
    return AnyLoader { await provider.city }
}
// Sample: end

// Sample: begin
actor QuoteStore {
    private var quotes: [String]?

    func save(_ quotes: [String]) { self.quotes = quotes }

    func load() throws -> [String] {
        guard let quotes else { throw CacheMiss.absent }
        return quotes
    }
}
// Sample: end

// Sample: begin
final class ScannerEvents: ScannerDelegate, Sendable {
    private let subject = StreamSubject<String, any Error>()

    var codes: EventStream<String, any Error> { subject.stream }

    func scanner(didRead code: String) { subject.send(code) }
    func scanner(didFailWith error: any Error) { subject.send(completion: .failure(error)) }
}
// Sample: end

final class BridgingSamplesTests: XCTestCase {
    func test_callbackAPI_completesOnce_andNeverAfterACancel() {
        let client = WeatherClient()
        let loader = ForecastLoader(client: client, city: "Paris")
        let results = LoadRecorder<Forecast>()

        results.load(loader).cancel()
        let done = expectation(description: "loaded")
        _ = loader.load { result in
            results.record(result)
            done.fulfill()
        }
        client.answerAll()  // the cancelled request first, then the other
        wait(for: [done], timeout: .watchdog)

        XCTAssertEqual(results.values, [Forecast(city: "Paris", degrees: 21)], "the cancelled load never completed")
    }

    func test_asyncAPI() async throws {
        let weather = Weather()

        // Sample: begin
        let forecast = AnyLoader { try await weather.forecast(for: "Paris") }
        // Sample: end

        let value = try await forecast.load()
        XCTAssertEqual(value, Forecast(city: "Paris", degrees: 19))
    }

    func test_nonSendableClient_behindAnActor() async throws {
        let payload = Data("23".utf8)

        // Sample: begin
        let service = ForecastService()
        let parsed = AnyLoader { try await service.forecast(from: payload) }
        // Sample: end

        let value = try await parsed.load()
        XCTAssertEqual(value.degrees, 23)
    }

    @MainActor
    func test_mainActorClient() async throws {
        let city = try await makeCityLoader().load()
        XCTAssertEqual(city, "Paris")
    }

    func test_actorAsACacheAndALoader() async throws {
        let api = QuotesAPI()

        // Sample: begin
        let store = QuoteStore()
        let cache = AnyCache<[String]> { quotes in await store.save(quotes) }
        let stored = AnyLoader { try await store.load() }
        let quotes = stored.fallback(to: api.quotes().caching(to: cache))
        // Sample: end

        let loaded = try await quotes.load()
        XCTAssertEqual(loaded, ["Simplicity is prerequisite for reliability."])
        let deadline = ContinuousClock.now + .seconds(5)  // the save runs in a task of its own
        while (try? await store.load()) == nil, ContinuousClock.now < deadline { await Task.yield() }
        let kept = try await stored.load()
        XCTAssertEqual(kept, loaded, "saved through the actor, and loaded from it")
    }

    func test_delegate() {
        let events = ScannerEvents()
        let recorder = StreamRecorder(events.codes)

        events.scanner(didRead: "4006381333931")
        events.scanner(didFailWith: CocoaError(.userCancelled))

        XCTAssertEqual(recorder.values, ["4006381333931"])
        XCTAssertNotNil(recorder.completion)
    }

    func test_asyncSequence_asAStream_stopsIteratingWhenCancelled() {
        let scanner = BarcodeScanner()

        // Sample: begin
        let (codes, continuation) = AsyncStream.makeStream(of: String.self)
        scanner.onRead = { code in continuation.yield(code) }
        let scanned = EventStream.elements(of: codes)
        // Sample: end

        let received = Locked<[String]>([])
        let first = expectation(description: "first code")
        let subscription = scanned.sink { _ in
        } receiveValue: { code in
            received.withLock { $0.append(code) }
            first.fulfill()
        }
        let ended = expectation(description: "the iteration ended")
        continuation.onTermination = { _ in ended.fulfill() }
        scanner.read("A")
        wait(for: [first], timeout: .watchdog)
        subscription.cancel()
        wait(for: [ended], timeout: .watchdog)
        scanner.read("B")  // dropped: nothing iterates the sequence any more

        XCTAssertEqual(received.withLock { $0 }, ["A"])
    }
}
