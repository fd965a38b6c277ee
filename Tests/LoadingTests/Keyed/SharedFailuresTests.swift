import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Stores standing for the instances of a service, sharing a level, a fetch lease and the failures of the fetches
/// made under it: a key the upstream refuses is asked once per window across them.
final class SharedFailuresTests: XCTestCase {
    private let sharing = FetchFailureSharing(
        for: .seconds(5), describe: { ($0 as? UnknownKey).map { "unknown \($0.key)" } },
        restore: { UnknownKey(key: String($0.dropFirst("unknown ".count))) })

    func test_aFailureTheHolderLeftOnTheLease_failsEveryInstancesReads_withoutAnUpstreamCall_untilItLapses() {
        let lease = MemoryLease()
        let upstream = RefusingUpstream()
        let instances = makeInstances(2, lease: lease, upstream: upstream, failures: sharing)

        XCTAssertEqual(failure(of: instances[0].read("NOPE")), UnknownKey(key: "NOPE"), "the holder's own failure")
        XCTAssertTrue(eventually { lease.log.last == "left “unknown NOPE” on NOPE for 5.0 seconds" })
        XCTAssertEqual(failure(of: instances[1].read("NOPE")), UnknownKey(key: "NOPE"), "restored in the other one")
        XCTAssertEqual(failure(of: instances[0].read("NOPE")), UnknownKey(key: "NOPE"), "and in the holder's again")
        XCTAssertEqual(upstream.calls, 1, "one upstream call for the window, across both instances")

        lease.lapse("NOPE")  // the window ended

        XCTAssertEqual(failure(of: instances[1].read("NOPE")), UnknownKey(key: "NOPE"))
        XCTAssertEqual(upstream.calls, 2, "asked again once the failure lapsed")
    }

    func test_aWaiter_getsTheFailureTheHolderLeavesWhileItWaits_andNeverGoesUpstream() {
        let lease = MemoryLease()
        let upstream = RefusingUpstream(answers: .whenOpened)
        // Waiting longer than the watchdog: only the failure left on the lease can end the wait in time.
        let instances = makeInstances(2, lease: lease, upstream: upstream, failures: sharing, waiting: .watchdog * 2)
        let holder = LoadRecorder<StoreResponse<String>>()
        _ = holder.load(instances[0].read("NOPE"))
        XCTAssertTrue(eventually { upstream.calls == 1 }, "the first instance took the lease and asks")
        let waiter = LoadRecorder<StoreResponse<String>>()
        _ = waiter.load(instances[1].read("NOPE"))
        XCTAssertTrue(eventually { lease.acquires >= 3 }, "the second waits for the holder, asking at each look")

        upstream.open()  // the holder's call fails: an upstream that stopped answering, timed out

        XCTAssertTrue(eventually { waiter.errors.count == 1 })
        XCTAssertEqual(waiter.errors.first as? UnknownKey, UnknownKey(key: "NOPE"))
        XCTAssertEqual(holder.errors.first as? UnknownKey, UnknownKey(key: "NOPE"))
        XCTAssertEqual(upstream.calls, 1, "the waiter did not fetch")
    }

    func test_aFailureTheSharingDoesNotDescribe_isNotLeftOnTheLease_soTheNextInstanceFetches() {
        let lease = MemoryLease()
        let upstream = RefusingUpstream()
        let instances = makeInstances(
            2, lease: lease, upstream: upstream,
            failures: FetchFailureSharing(
                for: .seconds(5), describe: { _ in nil }, restore: { _ in UnknownKey(key: "") }))

        XCTAssertNotNil(failure(of: instances[0].read("NOPE")))
        XCTAssertTrue(eventually { lease.log.last == "released NOPE after 0 saves" }, "given back plainly")
        XCTAssertNotNil(failure(of: instances[1].read("NOPE")))

        XCTAssertEqual(upstream.calls, 2)
    }

    func test_aLeaseThatKeepsNoFailure_givesItBack_soTheNextInstanceFetches() {
        let lease = ForgetfulLease()
        let upstream = RefusingUpstream()
        let instances = makeInstances(2, lease: lease, upstream: upstream, failures: sharing)

        XCTAssertEqual(failure(of: instances[0].read("NOPE")), UnknownKey(key: "NOPE"))
        XCTAssertTrue(eventually { lease.releases == 1 }, "the default gives the lease back")
        XCTAssertEqual(failure(of: instances[1].read("NOPE")), UnknownKey(key: "NOPE"))

        XCTAssertEqual(upstream.calls, 2)
    }

    func test_aSharedFailure_isToldAsTheCoordinationsOutcome() {
        let lease = MemoryLease()
        let upstream = RefusingUpstream()
        let told = Locked<[CoordinationOutcome]>([])
        let instances = makeInstances(
            2, lease: lease, upstream: upstream, failures: sharing,
            events: { event in
                if case .fetchCoordinated(_, _, let outcome, _) = event { told.withLock { $0.append(outcome) } }
            })

        _ = failure(of: instances[0].read("NOPE"))
        XCTAssertTrue(eventually { lease.log.last?.hasPrefix("left") == true })
        _ = failure(of: instances[1].read("NOPE"))

        XCTAssertEqual(told.withLock { $0 }, [.acquired, .failedBefore])
    }

    func test_aValueFetchedAfterTheWindow_replacesNothingButTheFailure() {
        let lease = MemoryLease()
        let upstream = RefusingUpstream(knows: ["ACME"])
        let instances = makeInstances(2, lease: lease, upstream: upstream, failures: sharing)

        XCTAssertEqual(awaitResponse(instances[0].read("ACME"))?.value, "quote ACME 1", "a known key is fetched")
        XCTAssertTrue(eventually { lease.log.last == "released ACME after 0 saves" }, "and its lease given back")
        XCTAssertEqual(awaitResponse(instances[1].read("ACME"))?.value, "quote ACME 1", "from the shared level")
        XCTAssertEqual(upstream.calls, 1)
    }

    // MARK: - Helpers

    private func makeInstances(
        _ count: Int, lease: some FetchLease<String>, upstream: RefusingUpstream, failures: FetchFailureSharing,
        waiting: Duration = .seconds(2), events: (@Sendable (StoreEvent<String>) -> Void)? = nil
    ) -> [Store<String, String>] {
        let shared = MemoryCache<String, String>()
        return (0..<count).map { _ in
            Store(
                levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(shared, name: "shared")],
                fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
                coordination: .lease(
                    lease, sharedLevel: "shared", waiting: waiting, polling: .milliseconds(5), failures: failures),
                events: events)
        }
    }

    /// The failure `read` ends with.
    private func failure(of read: some Loader<StoreResponse<String>>) -> UnknownKey? {
        let recorder = LoadRecorder<StoreResponse<String>>()
        _ = recorder.load(read)
        XCTAssertTrue(eventually { recorder.count == 1 }, "answered")
        return recorder.errors.first as? UnknownKey
    }
}

/// The upstream does not know the key.
private struct UnknownKey: Error, Equatable {
    let key: String
}

/// An upstream that knows only some keys (it fails with ``UnknownKey`` for the others), answering at once or once
/// opened.
private final class RefusingUpstream: Sendable {
    private struct State {
        var calls = 0
        var isOpen: Bool
        var held: [@Sendable () -> Void] = []
    }
    private let state: Locked<State>
    private let known: Set<String>

    init(knows known: Set<String> = [], answers: SlowUpstream.Answers = .atOnce) {
        self.known = known
        state = Locked(State(isOpen: answers == .atOnce))
    }

    var calls: Int { state.withLock { $0.calls } }

    /// Answers the calls held, and every later call at once.
    func open() {
        let held = state.withLock { state in
            state.isOpen = true
            return exchange(&state.held, with: [])
        }
        for answer in held { answer() }
    }

    func loader(for key: String) -> AnyLoader<String> {
        AnyLoader { [state, known] completion in
            let answer = state.withLock { state -> (@Sendable () -> Void)? in
                state.calls += 1
                let call = state.calls
                let answer: @Sendable () -> Void = {
                    completion(known.contains(key) ? .success("quote \(key) \(call)") : .failure(UnknownKey(key: key)))
                }
                guard state.isOpen else {
                    state.held.append(answer)
                    return nil
                }
                return answer
            }
            answer?()
            return AnyCancellationToken {}
        }
    }
}

/// A lease that keeps no failure: `release(_:leaving:for:)` and `failure(of:)` are the protocol's defaults.
private final class ForgetfulLease: FetchLease {
    private let held = Locked<Set<String>>([])
    private let released = Locked(0)

    var releases: Int { released.withLock { $0 } }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        held.withLock { $0.insert(key).inserted }
    }

    func release(_ key: String) async throws {
        held.withLock { _ = $0.remove(key) }
        released.withLock { $0 += 1 }
    }
}
