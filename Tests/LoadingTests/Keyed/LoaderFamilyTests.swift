import Dispatch
import Foundation
import Loading
import LoadingTestSupport
import XCTest

final class LoaderFamilyTests: XCTestCase {
    func test_subscript_buildsEachKeysLoaderFromTheSameComposites() {
        let memory = MemoryCache<String, String>()
        let network = KeyedLoaderSpy<String, String>()
        let family = LoaderFamily { (id: String) in
            memory[id].fallback(to: network[id].caching(to: memory[id]))
        }
        let recorder = LoadRecorder<String>()

        recorder.load(family["a"])
        network.complete("a", with: "A")
        recorder.load(family["a"])

        XCTAssertEqual(recorder.values, ["A", "A"])
        XCTAssertEqual(network.loadCount(for: "a"), 1, "the second load is a memory hit")
    }

    func test_coalesced_concurrentLoadsOfOneKeyShareOneUpstreamLoad() {
        let network = KeyedLoaderSpy<String, String>()
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
        let network = KeyedLoaderSpy<String, String>()
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
        let network = KeyedLoaderSpy<String, String>()
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
            let network = KeyedLoaderSpy<String, String>()
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
        let network = KeyedLoaderSpy<String, String>()
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
                return AnyCancellationToken {}
            }
        }.coalesced()
        let recorder = LoadRecorder<Int>()

        recorder.load(family[1])
        recorder.load(family[1])

        XCTAssertEqual(recorder.values, [2, 2])
    }

    func test_coalesced_aLoadThatCompletedBeforeReturning_isNotCancelled_andItsCallersTokenDoesNothing() {
        let upstreamCancels = Locked(0)
        let family = LoaderFamily { (key: Int) in
            AnyLoader<Int> { completion in
                completion(.success(key))
                return AnyCancellationToken { upstreamCancels.withLock { $0 += 1 } }
            }
        }.coalesced()
        let recorder = LoadRecorder<Int>()

        let token = recorder.load(family[7])
        token.cancel()

        XCTAssertEqual(recorder.values, [7])
        XCTAssertEqual(upstreamCancels.withLock { $0 }, 0, "a completed load has nothing to cancel")
    }

    func test_coalesced_keysSharingAHashValue_loadIndependently() {
        let network = KeyedLoaderSpy<CollidingKey, String>()
        let family = LoaderFamily { network[$0] }.coalesced()
        let a = LoadRecorder<String>()
        let b = LoadRecorder<String>()
        let alsoA = LoadRecorder<String>()

        a.load(family[CollidingKey(name: "a")])
        b.load(family[CollidingKey(name: "b")])
        alsoA.load(family[CollidingKey(name: "a")])
        XCTAssertEqual(network.loadCount(for: CollidingKey(name: "a")), 1)
        XCTAssertEqual(network.loadCount(for: CollidingKey(name: "b")), 1, "b does not join a's flight")

        network.complete(CollidingKey(name: "b"), with: "B")
        XCTAssertEqual(b.values, ["B"])
        XCTAssertEqual(a.count + alsoA.count, 0, "a's flight goes on")
        let leaving = family[CollidingKey(name: "b")].load { _ in XCTFail("cancelled") }
        leaving.cancel()
        XCTAssertEqual(network.cancelledCount(for: CollidingKey(name: "b")), 1)
        XCTAssertEqual(network.cancelledCount(for: CollidingKey(name: "a")), 0, "leaving b's flight leaves a's alone")

        network.complete(CollidingKey(name: "a"), with: "A")
        XCTAssertEqual(a.values, ["A"])
        XCTAssertEqual(alsoA.values, ["A"])
    }

    func test_coalesced_aCallerThatLeaves_releasesItsCompletionAtOnce_andTheOthersStillGetTheResult() {
        let network = KeyedLoaderSpy<String, String>()
        let family = LoaderFamily { network[$0] }.coalesced()
        let released = Locked(0)
        let staying = LoadRecorder<String>()

        let leaving = family["a"].load { [probe = DeinitProbe { released.withLock { $0 += 1 } }] _ in probe.touch() }
        staying.load(family["a"])
        leaving.cancel()

        XCTAssertEqual(released.withLock { $0 }, 1, "released by the cancel, not when the shared load ends")
        network.complete("a", with: "A")
        XCTAssertEqual(staying.values, ["A"])
    }

    func test_coalesced_aCallersCompletionIsReleasedOnceCalled_whileItsTokenIsKept() {
        let network = KeyedLoaderSpy<String, String>()
        let family = LoaderFamily { network[$0] }.coalesced()
        let released = Locked(0)

        let tokens = (0..<2).map { _ in
            family["a"].load { [probe = DeinitProbe { released.withLock { $0 += 1 } }] _ in probe.touch() }
        }
        network.complete("a", with: "A")

        XCTAssertEqual(released.withLock { $0 }, 2, "a kept token does not keep the completion")
        withExtendedLifetime(tokens) {}
    }

    func test_coalesced_aCallerCancelledByAnEarlierCallersCompletion_isNotCalled() {
        let network = KeyedLoaderSpy<String, String>()
        let family = LoaderFamily { network[$0] }.coalesced()
        let third = Locked<(any CancellationToken)?>(nil)
        let calls = Locked<[String]>([])

        _ = family["a"].load { _ in
            calls.withLock { $0.append("first") }
            third.withLock { $0 }?.cancel()
        }
        _ = family["a"].load { _ in calls.withLock { $0.append("second") } }
        let token = family["a"].load { _ in calls.withLock { $0.append("third") } }
        third.withLock { $0 = token }
        network.complete("a", with: "A")

        XCTAssertEqual(calls.withLock { $0 }, ["first", "second"])
        XCTAssertEqual(network.cancelledCount(for: "a"), 0, "the load had completed")
    }

    func test_coalesced_stress_manyThreadsManyKeysRandomCancels() {
        let keys = 100
        let loads = 10_000
        let upstream = HeldSource()
        let family = LoaderFamily { key in upstream.loader(for: key) }.coalesced()
        let completions = Locked([Int](repeating: 0, count: loads))
        let cancelled = Locked(Set<Int>())

        // 1. Loads from many threads, a fifth of them cancelled at once; no upstream load completes yet.
        DispatchQueue.concurrentPerform(iterations: loads) { index in
            let token = family[index % keys].load { result in
                XCTAssertEqual(try? result.get(), index % keys)
                completions.withLock { $0[index] += 1 }
            }
            if Int.random(in: 0..<5) == 0 {
                token.cancel()
                cancelled.withLock { _ = $0.insert(index) }
            }
        }
        // 2. Every key has at most one upstream load still running (the others were cancelled by their last caller).
        let running = upstream.runningLoadsByKey
        XCTAssertTrue(running.values.allSatisfy { $0 <= 1 }, "a key has two upstream loads in flight")
        XCTAssertLessThan(upstream.totalLoads, loads / 10, "loads of one key were not shared")
        // 3. The upstream loads complete, from many threads: every caller still there gets one result, the
        //    cancelled ones none.
        upstream.completeAll()

        let counts = completions.withLock { $0 }
        let cancelledCallers = cancelled.withLock { $0 }
        for index in 0..<loads {
            XCTAssertEqual(counts[index], cancelledCallers.contains(index) ? 0 : 1, "caller \(index)")
        }
    }
}

/// A source that holds every load until the test completes them all, and knows which were cancelled.
private final class HeldSource: Sendable {
    private struct Load: Sendable {
        let key: Int
        var completion: LoadCompletion<Int>?
    }

    private let loads = Locked<[Load]>([])

    var totalLoads: Int { loads.withLock { $0.count } }

    /// For each key, how many of its loads are neither completed nor cancelled.
    var runningLoadsByKey: [Int: Int] {
        loads.withLock { loads in
            loads.filter { $0.completion != nil }.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }
        }
    }

    func completeAll() {
        let pending = loads.withLock { loads in
            loads.indices.compactMap { index in loads[index].completion.take().map { (loads[index].key, $0) } }
        }
        DispatchQueue.concurrentPerform(iterations: pending.count) { pending[$0].1(.success(pending[$0].0)) }
    }

    func loader(for key: Int) -> AnyLoader<Int> {
        AnyLoader { [loads] completion in
            let index = loads.withLock { loads -> Int in
                loads.append(Load(key: key, completion: completion))
                return loads.count - 1
            }
            return AnyCancellationToken {
                let dropped = loads.withLock { $0[index].completion.take() }
                withExtendedLifetime(dropped) {}
            }
        }
    }
}

/// A key whose every value has the same hash value: two of them in flight at once share a hash value, not a flight.
private struct CollidingKey: Hashable, Sendable {
    let name: String

    func hash(into hasher: inout Hasher) {
        hasher.combine(0)
    }
}
