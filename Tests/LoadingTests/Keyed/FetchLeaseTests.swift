import Foundation
import Loading
import XCTest

/// Stores standing for the instances of a service, sharing a level and a fetch lease: a key missing everywhere is
/// fetched once across them, and a lease never fails a read.
final class FetchLeaseTests: XCTestCase {
    func test_aThousandCallersOverTwoInstances_makeOneUpstreamCallForAColdKey() {
        let shared = MemoryCache<String, String>()
        let lease = MemoryLease()
        let upstream = SlowUpstream(latency: .milliseconds(50))
        let instances = (0..<2).map { _ in
            Store(
                levels: [
                    .cache(MemoryCache<String, String>(), name: "memory"), .cache(shared, name: "shared"),
                ],
                fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
                coordination: .lease(lease, sharedLevel: "shared", polling: .milliseconds(5)))
        }

        let answers = Locked<[String]>([])
        let answered = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 1_000) { index in
            answered.enter()
            instances[index % 2].read("ACME").load { result in
                answers.withLock { $0.append((try? result.get().value) ?? "failed") }
                answered.leave()
            }
        }

        XCTAssertEqual(answered.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(upstream.calls, 1, "one upstream call across both instances")
        XCTAssertEqual(Set(answers.withLock { $0 }), ["quote ACME 1"])
        XCTAssertEqual(answers.withLock { $0.count }, 1_000)
    }

    func test_whenTheHoldersFetchFails_theOtherFetchesItselfAfterItsWait() {
        let shared = MemoryCache<String, String>()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease, and its fetch will bring nothing")
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .milliseconds(200), polling: .milliseconds(5)))

        let started = ContinuousClock.now
        let value = awaitValue(store.read("ACME"))

        XCTAssertEqual(value, "quote ACME 1")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(200), "it waited for the holder")
        XCTAssertEqual(upstream.calls, 1)
    }

    func test_aLeaseThatCannotBeReached_neverFailsARead() {
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(UnreachableLease(), sharedLevel: "shared"))

        XCTAssertEqual(awaitValue(store.read("ACME")), "quote ACME 1")
    }

    func test_aFetchThatEnds_givesTheLeaseBack_soThatTheNextOneNeedNotWait() {
        let lease = MemoryLease()
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .seconds(5)))

        XCTAssertEqual(awaitValue(store.freshValue(of: "ACME")), "quote ACME 1")
        XCTAssertTrue(eventually { !lease.isHeld("ACME") })
        let started = ContinuousClock.now
        XCTAssertEqual(awaitValue(store.freshValue(of: "ACME")), "quote ACME 2")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2), "the refresh took the lease at once")
    }

    func test_aFetchThatFails_givesTheLeaseBack() {
        let lease = MemoryLease()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (_: String) in FailingUpstream() },
            coordination: .lease(lease, sharedLevel: "shared"))

        XCTAssertNil(awaitValue(store.read("ACME")))

        XCTAssertTrue(eventually { !lease.isHeld("ACME") }, "released, so that another instance may try")
    }

    func test_aWaitingFetch_cancelledByItsLastCaller_neverGoesUpstream() {
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"))
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .milliseconds(100), polling: .milliseconds(5)))

        let read = store.read("ACME").load { _ in XCTFail("a cancelled load never completes") }
        Thread.sleep(forTimeInterval: 0.02)
        read.cancel()
        Thread.sleep(forTimeInterval: 0.2)

        XCTAssertEqual(upstream.calls, 0)
    }

    private func awaitValue(_ loader: AnyLoader<StoreResponse<String>>) -> String? {
        let value = Locked<String?>(nil)
        let done = expectation(description: "answered")
        loader.load { result in
            value.withLock { $0 = try? result.get().value }
            done.fulfill()
        }
        wait(for: [done], timeout: 5)
        return value.withLock { $0 }
    }

    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(5)
        while !condition() && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        return condition()
    }
}

/// A lease held in memory, as a database row would hold it for every instance.
private final class MemoryLease: FetchLease {
    private let held = Locked<Set<String>>([])

    func isHeld(_ key: String) -> Bool { held.withLock { $0.contains(key) } }

    /// Takes the lease for a test (standing for another instance).
    func take(_ key: String) -> Bool { held.withLock { $0.insert(key).inserted } }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool { take(key) }

    func release(_ key: String) async throws {
        _ = held.withLock { $0.remove(key) }
    }
}

/// A lease whose database cannot be reached.
private struct UnreachableLease: FetchLease {
    func acquire(_ key: String, for duration: Duration) async throws -> Bool { throw URLError(.cannotConnectToHost) }
    func release(_ key: String) async throws { throw URLError(.cannotConnectToHost) }
}

/// An upstream that answers after `latency`, counting its calls; its answer says which call it was.
private final class SlowUpstream: Sendable {
    private let count = Locked(0)
    private let latency: Duration

    init(latency: Duration) {
        self.latency = latency
    }

    var calls: Int { count.withLock { $0 } }

    func loader(for key: String) -> AnyLoader<String> {
        AnyLoader { [count, latency] completion in
            let call = count.withLock { count -> Int in
                count += 1
                return count
            }
            let answer: @Sendable () -> Void = { completion(.success("quote \(key) \(call)")) }
            if latency == .zero {
                answer()
            } else {
                DispatchQueue.global().asyncAfter(deadline: .now() + latency / .seconds(1), execute: answer)
            }
            return Inert()
        }
    }
}

/// An upstream that always fails.
private struct FailingUpstream: Loader {
    func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
        completion(.failure(URLError(.badServerResponse)))
        return Inert()
    }
}

/// A token with nothing to cancel.
private struct Inert: CancellationToken {
    func cancel() {}
}
