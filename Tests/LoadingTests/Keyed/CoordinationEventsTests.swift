import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A store's events tell how each coordinated fetch was settled: the lease taken, the holder's value come, the lease
/// taken over, the wait run out, or the lease unreachable.
final class CoordinationEventsTests: XCTestCase {
    func test_aFreeLease_isAcquired() {
        let (store, events) = instance(lease: MemoryLease())

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1")

        XCTAssertEqual(events.outcomes, [.acquired])
    }

    func test_aHoldersValue_answersTheWait() {
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease")
        let sharedTable = SharedTable()
        let (store, events) = instance(lease: lease, sharedTable: sharedTable)
        let answered = Locked<String?>(nil)

        store.read("ACME").load { result in answered.withLock { $0 = try? result.get().value } }
        XCTAssertTrue(eventually { sharedTable.reads >= 2 }, "waiting: the shared level read again")
        sharedTable.put("theirs", for: "ACME", savedAt: Date())

        XCTAssertTrue(eventually { answered.withLock { $0 } == "theirs" })
        XCTAssertEqual(events.outcomes, [.answeredByHolder])
    }

    func test_aLeaseThatLapsesWhileWaiting_isTakenOver() {
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"), "another instance holds the lease, and dies")
        let (store, events) = instance(lease: lease)
        let answered = Locked<String?>(nil)

        store.read("ACME").load { result in answered.withLock { $0 = try? result.get().value } }
        XCTAssertTrue(eventually { lease.acquires >= 2 }, "waiting: the lease asked for again")
        lease.lapse("ACME")

        XCTAssertTrue(eventually { answered.withLock { $0 } == "quote ACME 1" })
        XCTAssertEqual(events.outcomes, [.takenOver])
    }

    func test_aHolderThatKeepsTheLeasePastWaiting_isWaitedOut() {
        let lease = MemoryLease()
        XCTAssertTrue(lease.take("ACME"))
        let (store, events) = instance(lease: lease, waiting: .milliseconds(50))

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1")

        XCTAssertEqual(events.outcomes, [.waitedOut])
        XCTAssertGreaterThanOrEqual(events.durations.first ?? .zero, .milliseconds(50), "the wait's duration")
    }

    func test_anUnreachableLease_isToldSo() {
        let (store, events) = instance(lease: UnreachableLease())

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME 1")

        XCTAssertEqual(events.outcomes, [.unreachable])
    }

    // MARK: - Helpers

    /// An instance over a shared table and `lease`, and the coordination events it tells.
    private func instance(
        lease: some FetchLease<String>, sharedTable: SharedTable = SharedTable(), waiting: Duration = .watchdog * 2
    ) -> (Store<String, String>, Told) {
        let told = Told()
        let upstream = SlowUpstream()
        let store = Store(
            levels: [.cache(sharedTable, name: "shared")],
            fetch: LoaderFamily { (key: String) in upstream.loader(for: key) },
            coordination: .lease(lease, sharedLevel: "shared", waiting: waiting, polling: .milliseconds(5)),
            events: told.record)
        return (store, told)
    }

}

/// The coordination events a store told.
private final class Told: Sendable {
    private let told = Locked<[(outcome: CoordinationOutcome, duration: Duration)]>([])

    var outcomes: [CoordinationOutcome] { told.withLock { $0.map(\.outcome) } }
    var durations: [Duration] { told.withLock { $0.map(\.duration) } }

    func record(_ event: StoreEvent<String>) {
        guard case .fetchCoordinated(let key, _, let outcome, let duration) = event, key == "ACME" else { return }
        told.withLock { $0.append((outcome, duration)) }
    }
}
