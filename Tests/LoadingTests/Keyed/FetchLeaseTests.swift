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

    func test_aValueTheHolderSaved_keepsItsDateAndLevel_andIsNotWrittenBackToTheSharedLevel() {
        let shared = SharedTable()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease")
        let upstream = SlowUpstream(latency: .zero)
        let memory = MemoryCache<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory"), .cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", polling: .milliseconds(5)))

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        Thread.sleep(forTimeInterval: 0.05)
        let savedAt = Date()
        shared.put("quote from the holder", for: "ACME", savedAt: savedAt)  // the holder's save lands
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        let answer = response.withLock { $0 }
        XCTAssertEqual(answer?.value, "quote from the holder")
        XCTAssertEqual(answer?.origin, .cache("shared"), "an answer of the shared level, not of this process's fetch")
        XCTAssertEqual(answer?.savedAt?.timeIntervalSince(savedAt) ?? 1, 0, accuracy: 0.001, "the holder's date")
        XCTAssertEqual(shared.saves, 0, "not written back: the holder saved it")
        let kept = Locked<Date?>(nil)
        memory.value(for: "ACME") { result in kept.withLock { $0 = try? result.get().savedAt } }
        XCTAssertTrue(eventually { kept.withLock { $0 } != nil }, "promoted to the faster level")
        XCTAssertEqual(
            kept.withLock { $0 }?.timeIntervalSince(savedAt) ?? 1, 0, accuracy: 0.001,
            "the faster level keeps the holder's date")
        XCTAssertEqual(upstream.calls, 0)
    }

    func test_theLease_isGivenBackOnceTheFetchedValueReachedTheSharedLevel() {
        let shared = SharedTable()
        shared.holdSaves()
        let lease = MemoryLease()
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared"))

        let answered = expectation(description: "answered")
        store.read("ACME").load { _ in answered.fulfill() }
        XCTAssertTrue(eventually { upstream.calls == 1 })
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertTrue(lease.isHeld("ACME"), "the value is not in the shared level yet: another process would fetch")
        shared.releaseSaves()

        wait(for: [answered], timeout: 5)
        XCTAssertTrue(eventually { !lease.isHeld("ACME") })
        XCTAssertEqual(shared.saves, 1)
    }

    func test_aProcessThatTakesTheLeaseJustAsItIsGivenBack_takesTheValueSavedMeanwhile() {
        let shared = SharedTable()
        // The other instance's save lands and it gives the lease back between this one's miss and its acquire.
        let lease = HandOverLease { shared.put("quote from the holder", for: "ACME", savedAt: Date()) }
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared"))

        XCTAssertEqual(awaitValue(store.read("ACME")), "quote from the holder")
        XCTAssertEqual(upstream.calls, 0, "the value was there: no second upstream call")
        XCTAssertTrue(eventually { !lease.isHeld }, "and the lease it took is given back")
    }

    func test_aValueTheHolderFetchedBeforeThisReadBegan_butSavedAfterItMissed_isTheAnswer() {
        let shared = SharedTable()
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease: its answer came, its save is on the way")
        let holdersAnswer = Date()
        Thread.sleep(forTimeInterval: 0.01)
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .seconds(2), polling: .milliseconds(5)))

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        Thread.sleep(forTimeInterval: 0.05)  // the read missed: the shared level had nothing
        shared.put("quote from the holder", for: "ACME", savedAt: holdersAnswer)
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        XCTAssertEqual(response.withLock { $0 }?.value, "quote from the holder", "newer than what the read found")
        XCTAssertEqual(upstream.calls, 0)
    }

    func test_aKeyInvalidatedHere_doesNotTakeAValueSavedBeforeItsFetchBegan() {
        let shared = SharedTable()
        shared.put("old quote", for: "ACME", savedAt: Date())
        let lease = MemoryLease()
        let upstream = SlowUpstream(latency: .zero)
        let store = Store(
            levels: [.cache(shared, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(
                lease, sharedLevel: "shared", waiting: .milliseconds(200), polling: .milliseconds(5)))
        XCTAssertEqual(awaitValue(store.read("ACME")), "old quote")
        store.invalidate("ACME")
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease")
        let holdersAnswer = Date()
        Thread.sleep(forTimeInterval: 0.01)

        let response = Locked<StoreResponse<String>?>(nil)
        store.read("ACME").load { result in response.withLock { $0 = try? result.get() } }
        Thread.sleep(forTimeInterval: 0.05)
        shared.put("quote from before the invalidation", for: "ACME", savedAt: holdersAnswer)
        XCTAssertTrue(eventually { response.withLock { $0 } != nil })

        XCTAssertEqual(response.withLock { $0 }?.value, "quote ACME 1", "fetched after its wait: nothing newer came")
        XCTAssertEqual(upstream.calls, 1)
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

/// A lease that is free when asked, the previous holder having just done `handOver` (its save) and given it back.
private final class HandOverLease: FetchLease {
    private let handOver: @Sendable () -> Void
    private let held = Locked(false)

    init(handOver: @escaping @Sendable () -> Void) {
        self.handOver = handOver
    }

    var isHeld: Bool { held.withLock { $0 } }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        handOver()
        held.withLock { $0 = true }
        return true
    }

    func release(_ key: String) async throws {
        held.withLock { $0 = false }
    }
}

/// A level shared by instances: counts the saves the store makes, and holds them while told to.
private final class SharedTable: AsyncKeyedCache {
    private let rows = Locked<[String: CachedValue<String>]>([:])
    private let saveCount = Locked(0)
    private let holding = Locked(false)

    var saves: Int { saveCount.withLock { $0 } }

    /// Another instance's save, not counted.
    func put(_ value: String, for key: String, savedAt: Date) {
        rows.withLock { $0[key] = CachedValue(value, savedAt: savedAt) }
    }

    func holdSaves() { holding.withLock { $0 = true } }
    func releaseSaves() { holding.withLock { $0 = false } }

    func value(for key: String) async throws -> CachedValue<String>? { rows.withLock { $0[key] } }

    func save(_ value: String, for key: String, savedAt: Date) async throws {
        while holding.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        saveCount.withLock { $0 += 1 }
        put(value, for: key, savedAt: savedAt)
    }

    func removeValue(for key: String) async throws { _ = rows.withLock { $0.removeValue(forKey: key) } }
    func removeAll() async throws { rows.withLock { $0 = [:] } }
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
