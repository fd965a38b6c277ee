import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A store shut down: its level writes waited for (for a bounded time), then its fetch leases given back, so that
/// another instance need not wait for them to lapse.
final class StoreShutdownTests: XCTestCase {
    func test_aShutDown_waitsForTheSavesUnderWay_thenGivesTheLeaseBack() async {
        let sharedTable = SharedTable()
        let lease = MemoryLease(savesOf: sharedTable)
        let store = instance(over: sharedTable, lease: lease, fetching: SlowUpstream())
        sharedTable.holdSaves()
        store.read("ACME").load { _ in }
        let saving = await eventually { sharedTable.savesStarted == 1 }
        XCTAssertTrue(saving)

        let shutDown = Task { await store.shutDown(waitingAtMost: .watchdog * 2) }
        XCTAssertTrue(lease.isHeld("ACME"))
        sharedTable.releaseSaves()
        await shutDown.value

        XCTAssertFalse(lease.isHeld("ACME"))
        XCTAssertEqual(lease.log.first, "acquired ACME")
        XCTAssertEqual(lease.log.dropFirst().first, "released ACME after 1 save", "given back once saved")
    }

    func test_aShutDown_givesBackTheLeaseOfAFetchStillInFlight() async {
        let sharedTable = SharedTable()
        let lease = MemoryLease(savesOf: sharedTable)
        let upstream = SlowUpstream(answers: .whenOpened)
        let store = instance(over: sharedTable, lease: lease, fetching: upstream)
        let answered = Locked<String?>(nil)
        store.read("ACME").load { result in answered.withLock { $0 = try? result.get().value } }
        let fetching = await eventually { upstream.calls == 1 }
        XCTAssertTrue(fetching)
        XCTAssertTrue(lease.isHeld("ACME"))

        await store.shutDown(waitingAtMost: .watchdog * 2)

        XCTAssertFalse(lease.isHeld("ACME"), "another instance may fetch the key at once")
        upstream.open()
        let done = await eventually { answered.withLock { $0 } == "quote ACME 1" }
        XCTAssertTrue(done, "the fetch still answers its caller")
    }

    func test_aShutDown_waitsAtMostItsLimit_andGivesTheLeasesBackAnyway() async {
        let sharedTable = SharedTable()
        let lease = MemoryLease(savesOf: sharedTable)
        let store = instance(over: sharedTable, lease: lease, fetching: SlowUpstream())
        sharedTable.holdSaves()  // a database that never answers the save
        store.read("ACME").load { _ in }
        let saving = await eventually { sharedTable.savesStarted == 1 }
        XCTAssertTrue(saving)

        await store.shutDown(waitingAtMost: .milliseconds(50))

        XCTAssertFalse(lease.isHeld("ACME"))
        XCTAssertEqual(sharedTable.saves, 0, "the save still under way")
        sharedTable.releaseSaves()
    }

    func test_aShutDown_givesBackALeaseWhoseReleaseIsStillUnderWay() async {
        let sharedTable = SharedTable()
        let lease = SlowFirstReleaseLease(MemoryLease(savesOf: sharedTable))
        let store = instance(over: sharedTable, lease: lease, fetching: SlowUpstream())
        store.read("ACME").load { _ in }
        // The value saved, the store gives the lease back; that call has not answered yet.
        let releasing = await eventually { lease.releasesAsked == 1 }
        XCTAssertTrue(releasing)
        XCTAssertTrue(lease.isHeld("ACME"))

        await store.shutDown(waitingAtMost: .watchdog * 2)

        XCTAssertFalse(lease.isHeld("ACME"), "given back by the time the shutdown returns")
        lease.answerFirstRelease()
    }

    func test_theDocumentedShutDown() async {
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory")],
            fetch: LoaderFamily { (key: String) in SlowUpstream().loader(for: key) })
        _ = try? await store.read("ACME").load()

        // Sample: begin
        // The server stopped taking requests (SIGTERM):
        await store.shutDown(waitingAtMost: .seconds(5))
        // Sample: end

        let value = try? await store.read("ACME").load().value
        XCTAssertEqual(value, "quote ACME 1", "the store keeps working")
    }

    /// An instance of a service: the shared table, the lease, an upstream.
    private func instance(
        over sharedTable: SharedTable, lease: some FetchLease<String>, fetching upstream: SlowUpstream
    ) -> Store<String, String> {
        Store(
            levels: [.cache(sharedTable, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))
    }
}

/// A lease whose first release does not answer until the test lets it: a release still under way.
private final class SlowFirstReleaseLease: FetchLease {
    private let lease: MemoryLease
    private let state = Locked<(asked: Int, answer: CheckedContinuation<Void, Never>?, answered: Bool)>((0, nil, false))

    init(_ lease: MemoryLease) {
        self.lease = lease
    }

    var releasesAsked: Int { state.withLock { $0.asked } }

    func isHeld(_ key: String) -> Bool { lease.isHeld(key) }

    /// Lets the first release answer (it gives the lease back then).
    func answerFirstRelease() {
        let answer = state.withLock { state in
            state.answered = true
            return state.answer.take()
        }
        answer?.resume()
    }

    func acquire(_ key: String, for duration: Duration) async throws -> Bool {
        try await lease.acquire(key, for: duration)
    }

    func release(_ key: String) async throws {
        let isFirst = state.withLock { state in
            state.asked += 1
            return state.asked == 1 && !state.answered
        }
        if isFirst {
            await withCheckedContinuation { continuation in
                let answered = state.withLock { state in
                    if !state.answered { state.answer = continuation }
                    return state.answered
                }
                if answered { continuation.resume() }
            }
        }
        try await lease.release(key)
    }
}
