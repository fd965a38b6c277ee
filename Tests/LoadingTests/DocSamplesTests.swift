import Foundation
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The code samples of the public doc comments, as written (with the few declarations they assume), so that the
// compiler checks every one under Swift 6; the cheap ones also run.

// MARK: PendingLoad

// QuoteLoader: the PendingLoad sample, in DocCommentSamplesTests.swift.

// MARK: sink(on:)

// Sample: begin
@MainActor final class FriendsScreen {
    var subscription: StreamSubscription?

    func bind(to states: EventStream<LoadingState<[String]>, Never>) {
        subscription = states.sink(on: .main) { [weak self] state in self?.render(state) }
    }

    func render(_ state: LoadingState<[String]>) {}
}
// Sample: end

/// A loader that delivers `value` at once.
private struct Just<Output: Sendable>: Loader {
    let value: Output
    init(_ value: Output) { self.value = value }
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        completion(.success(value))
        return AnyCancellationToken {}
    }
}

// MARK: AnyCache from an actor

// QuoteStore: the Bridging article's, in BridgingSamplesTests.swift.

// MARK: TaskScheduler

private enum RequestID {
    @TaskLocal static var current: String?
}

private struct QuoteClient: Sendable {
    func quote() async throws -> String { RequestID.current ?? "none" }
}

final class DocSamplesTests: XCTestCase {
    func test_locked() {
        let hits = Locked(0)
        hits.withLock { $0 += 1 }

        let handlers = Locked<[@Sendable () -> Void]>([])
        let taken = handlers.withLock { handlers in
            defer { handlers = [] }
            return handlers
        }
        for handler in taken { handler() }  // called, then released, after unlocking

        XCTAssertEqual(hits.withLock { $0 }, 1)
    }

    func test_loaderSpyAndLoadRecorder() {
        let primary = LoaderSpy<[String]>()
        let secondary = LoaderSpy<[String]>()
        let recorder = LoadRecorder<[String]>()
        let token = recorder.load(primary.fallback(to: secondary))
        primary.fail(with: URLError(.notConnectedToInternet))  // the first request fails...
        XCTAssertEqual(secondary.loadCount, 1)  // ...so the fallback starts
        token.cancel()
        XCTAssertEqual(secondary.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }

    func test_keyedLoaderSpy() {
        let ada = "Ada"
        let network = KeyedLoaderSpy<String, String>()
        let friend = LoaderFamily { network[$0] }.coalesced()
        let recorder = LoadRecorder<String>()
        recorder.load(friend["u1"])
        recorder.load(friend["u1"])
        network.complete("u1", with: ada)
        XCTAssertEqual(network.loadCount(for: "u1"), 1)
        XCTAssertEqual(recorder.values, [ada, ada])
    }

    func test_anyCacheFromAnActor() async {
        let store = QuoteStore()
        let cache = AnyCache<[String]> { quotes in await store.save(quotes) }
        let saved = expectation(description: "saved")
        cache.save(["q"]) { _ in saved.fulfill() }
        await fulfillment(of: [saved], timeout: .watchdog)
        let quotes = try? await store.load()
        XCTAssertEqual(quotes, ["q"])
    }

    func test_taskScheduler() async throws {
        let client = QuoteClient()
        let upstream = AnyLoader { try await client.quote() }
            .timeout(after: .seconds(2), scheduler: .task)
            .retry(.exponential(initial: .milliseconds(100), maxAttempts: 3), scheduler: .task)
        // Every attempt sees the request id.
        let quote = try await RequestID.$current.withValue("req-42") { try await upstream.load() }
        XCTAssertEqual(quote, "req-42")
    }

    func test_retryPolicies() {
        let remote = LoaderSpy<Int>()
        _ = remote.retry(.exponential(initial: .milliseconds(200), maxDelay: .seconds(5), maxAttempts: 4))
        _ = remote.retry(.constant(.seconds(1), maxAttempts: 3).retrying { $0 is TimeoutError })
        let liveUpdates = StreamSubject<Int, any Error>().stream
        _ = liveUpdates.retry(.exponential(initial: .seconds(1), maxAttempts: .max), scheduler: .global())
        _ = liveUpdates.retry(
            .exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: .max)
                .resettingAttempts(after: .seconds(10)),
            scheduler: .global())
    }

    func test_caches() async throws {
        let memory = MemoryCache<String, Int>(countLimit: 500, expiry: .maxAge(.seconds(300)))
        let clock = TestClock()
        let expiring = MemoryCache<String, Int>(expiry: .maxAge(.seconds(60)), now: { clock.now })
        try await expiring.save(1, for: "a")
        clock.advance(by: 61)  // what memory holds has now expired
        let expired = try? await expiring.value(for: "a")
        XCTAssertNil(expired)
        let entry = memory["u1"]
        try await entry.save(1)
        let saved = try await memory.value(for: "u1")
        XCTAssertEqual(saved.value, 1)
    }

    func test_tryMap() {
        let friends = Just(["Ada"])
        let first = friends.tryMap { friends in
            guard let friend = friends.first else { throw CacheMiss.absent }
            return friend
        }
        let results = LoadRecorder<String>()
        results.load(first)
        results.load(
            Just([String]()).tryMap { friends in
                guard let friend = friends.first else { throw CacheMiss.absent }
                return friend
            })
        XCTAssertEqual(results.values, ["Ada"])
        XCTAssertEqual(results.errors.first as? CacheMiss, .absent)
    }

    @MainActor
    func test_mainActorScreenCompiles() {
        let screen = FriendsScreen()
        screen.bind(to: CurrentValueStreamSubject<LoadingState<[String]>, Never>(.idle).stream)
        XCTAssertNotNil(screen.subscription)
    }

    func test_quoteLoaderCompiles() {
        _ = QuoteLoader(session: URLSession(configuration: .ephemeral), url: URL(string: "http://127.0.0.1:9/")!)
    }
}

final class LoadingErrorMessagesTests: XCTestCase {
    func test_everyPublicErrorDescribesWhatHappened_inBothDescriptions() {
        let errors: [(any Error, mentions: String)] = [
            (TimeoutError(interval: .seconds(2)), "did not finish within"),
            (StreamFinishedWithoutValueError(), "finished without sending a value"),
            (CacheMiss.absent, "holds no value"),
            (CacheMiss.expired(savedAt: Date(timeIntervalSince1970: 0)), "has expired"),
            (StoreError.discarded, "discarded"),
            (StoreError.cleared, "cleared"),
        ]
        for (error, mentions) in errors {
            XCTAssertTrue(String(describing: error).contains(mentions), String(describing: error))
            XCTAssertEqual(error.localizedDescription, String(describing: error))
        }
    }
}
