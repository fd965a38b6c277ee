import Dispatch
import Foundation
import Loading
import LoadingTestSupport
import XCTest

final class LoaderFamilyTests: XCTestCase {
    func test_subscript_buildsEachKeysLoaderFromTheSameComposites() {
        let memory = MemoryCache<String, String>()
        let network = KeyedSpy()
        let family = LoaderFamily { (id: String) in
            memory[id].fallback(to: network[id].caching(to: memory[id]))
        }
        let recorder = LoadRecorder<String>()

        recorder.load(family["a"])
        network.complete("a", with: "A")
        recorder.load(family.loader(for: "a"))

        XCTAssertEqual(recorder.values, ["A", "A"])
        XCTAssertEqual(network.loadCount(for: "a"), 1, "the second load is a memory hit")
    }

    func test_coalesced_concurrentLoadsOfOneKeyShareOneUpstreamLoad() {
        let network = KeyedSpy()
        let family = LoaderFamily { network[$0] }.coalesced()
        let first = LoadRecorder<String>()
        let second = LoadRecorder<String>()

        first.load(family["a"])
        second.load(family["a"])
        network.complete("a", with: "A")

        XCTAssertEqual(network.loadCount(for: "a"), 1)
        XCTAssertEqual(first.values, ["A"])
        XCTAssertEqual(second.values, ["A"])
    }

    func test_coalesced_differentKeysLoadIndependently() {
        let network = KeyedSpy()
        let family = LoaderFamily { network[$0] }.coalesced()
        let recorder = LoadRecorder<String>()

        recorder.load(family["a"])
        recorder.load(family["b"])
        network.complete("b", with: "B")

        XCTAssertEqual(recorder.values, ["B"], "b does not wait for a")
        network.complete("a", with: "A")
        XCTAssertEqual(recorder.values, ["B", "A"])
    }

    func test_coalesced_aCallersCancelDropsOnlyItsInterest() {
        let network = KeyedSpy()
        let family = LoaderFamily { network[$0] }.coalesced()
        let leaving = LoadRecorder<String>()
        let staying = LoadRecorder<String>()

        leaving.load(family["a"]).cancel()
        staying.load(family["a"])
        XCTAssertEqual(network.loadCount(for: "a"), 2, "the first flight was cancelled by its only caller")

        let alsoLeaving = LoadRecorder<String>()
        alsoLeaving.load(family["a"]).cancel()
        network.complete("a", with: "A")

        XCTAssertEqual(leaving.count, 0)
        XCTAssertEqual(alsoLeaving.count, 0)
        XCTAssertEqual(staying.values, ["A"])
        XCTAssertEqual(network.cancelledCount(for: "a"), 1)
    }

    func test_coalesced_lastCallerOutCancelsTheUpstream_inEitherOrder() {
        for order in [[0, 1], [1, 0]] {
            let network = KeyedSpy()
            let family = LoaderFamily { network[$0] }.coalesced()
            let tokens = [
                family["a"].load { _ in XCTFail("cancelled") }, family["a"].load { _ in XCTFail("cancelled") },
            ]

            tokens[order[0]].cancel()
            XCTAssertEqual(network.cancelledCount(for: "a"), 0, "one caller is still there")
            tokens[order[1]].cancel()
            XCTAssertEqual(network.cancelledCount(for: "a"), 1)
            network.complete("a", with: "late")
        }
    }

    func test_coalesced_aLoadAfterCompletionStartsANewOne() {
        let network = KeyedSpy()
        let family = LoaderFamily { network[$0] }.coalesced()
        let recorder = LoadRecorder<String>()

        recorder.load(family["a"])
        network.complete("a", with: "A1")
        recorder.load(family["a"])
        network.complete("a", with: "A2")

        XCTAssertEqual(network.loadCount(for: "a"), 2)
        XCTAssertEqual(recorder.values, ["A1", "A2"])
    }

    func test_coalesced_synchronousUpstreamCompletesEveryCallerOnce() {
        let family = LoaderFamily { (key: Int) in
            AnyLoader<Int> { completion in
                completion(.success(key * 2))
                return AnyCancellationToken()
            }
        }.coalesced()
        let recorder = LoadRecorder<Int>()

        recorder.load(family[1])
        recorder.load(family[1])

        XCTAssertEqual(recorder.values, [2, 2])
    }

    func test_coalesced_stress_manyThreadsManyKeysRandomCancels() {
        let keys = 100
        let loads = 10_000
        let upstream = CountingSource()
        let family = LoaderFamily { key in upstream.loader(for: key) }.coalesced()
        let completions = Locked([Int](repeating: 0, count: loads))
        // Each caller leaves the group once: when it completes, or when its cancel found it still pending.
        let settled = Locked([Bool](repeating: false, count: loads))
        let group = DispatchGroup()
        @Sendable func settle(_ index: Int) {
            let first = settled.withLock { settled -> Bool in
                defer { settled[index] = true }
                return !settled[index]
            }
            if first { group.leave() }
        }

        for _ in 0..<loads { group.enter() }
        DispatchQueue.concurrentPerform(iterations: loads) { index in
            let token = family[index % keys].load { result in
                XCTAssertEqual(try? result.get(), index % keys)
                completions.withLock { $0[index] += 1 }
                settle(index)
            }
            if Int.random(in: 0..<5) == 0 {
                token.cancel()
                settle(index)
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success, "a caller neither completed nor was cancelled")
        upstream.waitUntilIdle()

        XCTAssertTrue(completions.withLock { $0 }.allSatisfy { $0 <= 1 }, "a caller completed more than once")
        XCTAssertEqual(upstream.maxConcurrentFlights, 1, "a key had two upstream loads in flight at once")
        XCTAssertLessThan(upstream.totalLoads, loads, "loads of one key were not shared")
    }
}

/// A network double by key: each load waits until the test completes it.
private final class KeyedSpy: Sendable {
    private let spies = Locked<[String: LoaderSpy<String>]>([:])

    subscript(key: String) -> LoaderSpy<String> {
        spies.withLock { spies in
            if let spy = spies[key] { return spy }
            let spy = LoaderSpy<String>()
            spies[key] = spy
            return spy
        }
    }

    func complete(_ key: String, with value: String) {
        let spy = self[key]
        for index in spy.pendingRequests { spy.complete(with: value, at: index) }
    }

    func loadCount(for key: String) -> Int { self[key].loadCount }
    func cancelledCount(for key: String) -> Int { self[key].cancelledRequests.count }
}

/// A source that completes each load on another thread after a moment, and records how many loads of one key were
/// in flight at once (a cancelled load leaves at its cancel).
private final class CountingSource: Sendable {
    private let inFlight = Locked<[Int: Int]>([:])
    private let maximum = Locked(0)
    private let started = Locked(0)
    private let running = DispatchGroup()

    var maxConcurrentFlights: Int { maximum.withLock { $0 } }
    var totalLoads: Int { started.withLock { $0 } }

    func waitUntilIdle() { _ = running.wait(timeout: .now() + 10) }

    func loader(for key: Int) -> AnyLoader<Int> {
        AnyLoader { [self] completion in
            started.withLock { $0 += 1 }
            let count = inFlight.withLock { inFlight -> Int in
                inFlight[key, default: 0] += 1
                return inFlight[key]!
            }
            maximum.withLock { $0 = max($0, count) }
            let isDone = Locked(false)
            let leave: @Sendable () -> Bool = {
                let first = isDone.withLock { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { self.inFlight.withLock { $0[key, default: 0] -= 1 } }
                return first
            }
            running.enter()
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int.random(in: 0...200))) {
                if leave() { completion(.success(key)) }
                self.running.leave()
            }
            return AnyCancellationToken { _ = leave() }
        }
    }
}
