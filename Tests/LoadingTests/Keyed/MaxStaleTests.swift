import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A read whose fetch fails answers with the value it has, the fetch's error attached (stale-if-error); with a
/// `maxStale`, only while that value is at most its `maxAge` plus `maxStale` old, whether the store holds it or a
/// level does.
final class MaxStaleTests: XCTestCase {
    func test_aValuePastItsAge_isServedWithTheError_whileWithinMaxStale_thenTheReadFails() {
        let clock = TestClock()
        let upstream = FailingQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) }, now: { clock.now })
        let policy = ReadPolicy.cacheFirst(maxAge: .seconds(5), maxStale: .seconds(60))
        XCTAssertEqual(awaitResponse(store.read("ACME", policy: policy))?.value, "quote ACME")
        upstream.fails = true

        clock.advance(by: 64)  // 59 s past its age
        let stale = awaitResponse(store.read("ACME", policy: policy))
        clock.advance(by: 1)  // 60 s past it
        let tooStale = awaitResponse(store.read("ACME", policy: policy))

        XCTAssertEqual(stale?.value, "quote ACME", "served: the upstream failed")
        XCTAssertNotNil(stale?.error, "marked with the fetch's error")
        XCTAssertNil(tooStale?.value, "too stale to serve: the read fails")
        XCTAssertEqual(upstream.calls, 3)
    }

    func test_aLevelsValuePastMaxStale_isNotServedEither() {
        let clock = TestClock()
        let memory = MemoryCache<String, String>()
        memory.save("old quote", for: "ACME", savedAt: clock.now) { _ in }
        let upstream = FailingQuotes()
        upstream.fails = true
        let store = Store(
            levels: [.cache(memory, name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) }, now: { clock.now })

        clock.advance(by: 30)
        let stale = awaitResponse(store.read("ACME", policy: .cacheFirst(maxAge: .seconds(5), maxStale: .seconds(60))))
        let strict = ReadPolicy.cacheFirst(maxAge: .seconds(5), maxStale: .seconds(10))
        let tooStale = awaitResponse(store.read("ACME", policy: strict))

        XCTAssertEqual(stale?.value, "old quote")
        XCTAssertNotNil(stale?.error)
        XCTAssertNil(tooStale?.value, "30 s old: past 5 s + 10 s")
    }

    func test_withoutMaxStale_anyValueIsServedWithTheError() {
        let clock = TestClock()
        let upstream = FailingQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) }, now: { clock.now })
        _ = awaitResponse(store.read("ACME"))
        upstream.fails = true

        clock.advance(by: 86_400)
        let old = awaitResponse(store.read("ACME", policy: .cacheFirst(maxAge: .seconds(5))))

        XCTAssertEqual(old?.value, "quote ACME")
        XCTAssertNotNil(old?.error)
    }

    func test_theDocumentedRead() async throws {
        let upstream = FailingQuotes()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (symbol: String) in upstream.quote(symbol) })
        let symbol = "ACME"

        // Sample: begin
        let quote = try await store.read(symbol, policy: .cacheFirst(maxAge: .seconds(5), maxStale: .seconds(60)))
            .load()
        // Sample: end

        XCTAssertEqual(quote.value, "quote ACME")
    }
}

/// A quotes API that answers, or fails once told to, counting its calls.
private final class FailingQuotes: Sendable {
    private let state = Locked((calls: 0, fails: false))

    var calls: Int { state.withLock { $0.calls } }
    var fails: Bool {
        get { state.withLock { $0.fails } }
        set { state.withLock { $0.fails = newValue } }
    }

    func quote(_ symbol: String) -> AnyLoader<String> {
        AnyLoader { [state] completion in
            let fails = state.withLock { state in
                state.calls += 1
                return state.fails
            }
            completion(fails ? .failure(URLError(.timedOut)) : .success("quote \(symbol)"))
            return AnyCancellationToken {}
        }
    }
}
