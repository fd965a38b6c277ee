import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// Refreshing within a budget (a background refresh): the keys observed most recently first, nothing started after
/// the deadline, a cancel stops the fetch running, the levels flushed, and a report of every key.
final class BudgetRevalidationTests: XCTestCase {
    func test_aBudgetThatFitsTenFetches_refreshesTheTenObservedMostRecently_andSkipsTheRest() async {
        let clock = ManualClock()
        let upstream = Upstream(clock: clock, takes: .seconds(1))
        let store = Store<Int, String>(levels: [], fetch: LoaderFamily { key in upstream.loader(for: key) })
        for key in 0..<50 {
            store.write("old \(key)", for: key)
            store.changes(for: key).sink { _ in }.cancel()  // observed, in this order
        }
        store.invalidateAll()

        let report = await store.revalidate(within: .seconds(10), clock: clock)

        XCTAssertEqual(report.refreshed, Array((40..<50).reversed()))
        XCTAssertEqual(report.skipped.sorted(), Array(0..<40))
        XCTAssertTrue(report.failed.isEmpty)
        XCTAssertEqual(upstream.asked, Array((40..<50).reversed()), "nothing started after the deadline")
        XCTAssertEqual(store.state(for: 49).value, "fresh 49")
        XCTAssertEqual(store.state(for: 39).value, "old 39")
    }

    func test_keysObservedNow_comeFirst_freshKeysAreLeftAlone_andFailuresAreReported() async {
        let clock = ManualClock()
        let upstream = Upstream(clock: clock, takes: .seconds(1), failing: [2])
        let time = TestClock()
        let store = Store<Int, String>(
            levels: [], fetch: LoaderFamily { key in upstream.loader(for: key) }, maxAge: .seconds(60),
            now: { time.now })
        for key in 0..<3 { store.write("old \(key)", for: key) }
        let watching = [store.changes(for: 1).sink { _ in }, store.changes(for: 2).sink { _ in }]
        store.changes(for: 0).sink { _ in }.cancel()  // observed after 1 and 2, but not now
        time.advance(by: 61)  // older than the store's maxAge: not fresh
        store.write("new 3", for: 3)
        store.changes(for: 3).sink { _ in }.cancel()  // observed last, and fresh

        let report = await store.revalidate(within: .seconds(100), clock: clock)

        XCTAssertEqual(upstream.asked, [2, 1, 0], "observed now (the latest first), then observed earlier")
        XCTAssertEqual(report.refreshed, [1, 0])
        XCTAssertEqual(report.failed.map(\.key), [2])
        XCTAssertTrue(report.failed.first?.error is TestError)
        XCTAssertEqual(report.skipped, [])
        withExtendedLifetime(watching) {}
    }

    func test_aCancelledRevalidation_cancelsTheFetchRunning_startsNoOther_andReportsThemSkipped() async throws {
        let clock = ManualClock()
        let upstream = Upstream(clock: clock, takes: .zero, holds: true)
        let store = Store<Int, String>(levels: [], fetch: LoaderFamily { key in upstream.loader(for: key) })
        for key in 0..<3 {
            store.write("old \(key)", for: key)
            store.changes(for: key).sink { _ in }.cancel()
        }
        store.invalidateAll()

        let revalidation = Task { await store.revalidate(within: .seconds(100), clock: clock) }
        let started = await eventually { upstream.asked.count == 1 }
        XCTAssertTrue(started)
        revalidation.cancel()
        let report = await revalidation.value

        XCTAssertEqual(upstream.asked, [2])
        XCTAssertEqual(upstream.cancelled, [2], "the fetch running is cancelled")
        XCTAssertEqual(report.skipped.sorted(), [0, 1, 2])
        XCTAssertEqual(report.refreshed, [])
    }

    func test_whatADebouncedLevelWaitsFor_isSavedBeforeTheReportReturns() async {
        let scheduler = TestScheduler()
        let disk = MemoryCache<Int, String>()
        let store = Store<Int, String>(
            levels: [.cache(disk, name: "disk", debouncingWritesFor: .seconds(5), scheduler: scheduler)],
            fetch: LoaderFamily { key in Upstream(clock: ManualClock(), takes: .zero).loader(for: key) })
        store.write("edited", for: 7)
        XCTAssertNil(try? disk.cachedValue(for: 7).get(), "waiting for the debounce")

        _ = await store.revalidate(within: .seconds(1), clock: ManualClock())

        XCTAssertEqual(try? disk.cachedValue(for: 7).get().value, "edited")
    }

    func test_offline_fetchesNothing_andSkipsEveryKey() async {
        let upstream = Upstream(clock: ManualClock(), takes: .zero)
        let store = Store<Int, String>(
            levels: [], fetch: LoaderFamily { key in upstream.loader(for: key) },
            network: .waitsForNetwork(ManualConnectivity(isOnline: false)))
        store.write("old", for: 1)
        store.changes(for: 1).sink { _ in }.cancel()
        store.invalidate(1)

        let report = await store.revalidate(within: .seconds(10))

        XCTAssertEqual(report.skipped, [1])
        XCTAssertEqual(upstream.asked, [])
    }

}

/// An upstream whose every fetch takes `takes` on a manual clock (it moves the clock as it answers), recording the
/// keys asked and cancelled; while `holds`, fetches wait until cancelled.
private final class Upstream: Sendable {
    private let clock: ManualClock
    private let takes: Duration
    private let failing: Set<Int>
    private let holds: Bool
    private let log = Locked((asked: [Int](), cancelled: [Int]()))

    init(clock: ManualClock, takes: Duration, failing: Set<Int> = [], holds: Bool = false) {
        self.clock = clock
        self.takes = takes
        self.failing = failing
        self.holds = holds
    }

    var asked: [Int] { log.withLock { $0.asked } }
    var cancelled: [Int] { log.withLock { $0.cancelled } }

    func loader(for key: Int) -> AnyLoader<String> {
        AnyLoader { [self] completion in
            log.withLock { $0.asked.append(key) }
            guard !holds else {
                return AnyCancellationToken { [log] in log.withLock { $0.cancelled.append(key) } }
            }
            clock.advance(by: takes)
            completion(failing.contains(key) ? .failure(TestError(id: key)) : .success("fresh \(key)"))
            return AnyCancellationToken {}
        }
    }
}
