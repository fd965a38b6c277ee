import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class SchedulerTests: XCTestCase {
    func test_testScheduler_runsActionsInDueOrderAndMovesTheClock() {
        let scheduler = TestScheduler()
        let log = Locked<[String]>([])
        scheduler.schedule(after: .seconds(2)) { log.withLock { $0.append("b at \(scheduler.now)") } }
        scheduler.schedule(after: .seconds(1)) { log.withLock { $0.append("a at \(scheduler.now)") } }
        scheduler.schedule { log.withLock { $0.append("now") } }

        scheduler.advance(by: .milliseconds(1500))
        XCTAssertEqual(log.withLock { $0 }, ["now", "a at 1.0 seconds"])
        XCTAssertEqual(scheduler.now, .milliseconds(1500))
        scheduler.run()

        XCTAssertEqual(log.withLock { $0 }, ["now", "a at 1.0 seconds", "b at 2.0 seconds"])
    }

    func test_testScheduler_cancelledActionNeverRuns() {
        let scheduler = TestScheduler()
        let ran = Locked(false)
        scheduler.schedule(after: .seconds(1)) { ran.withLock { $0 = true } }.cancel()

        scheduler.run()

        XCTAssertFalse(ran.withLock { $0 })
    }

    func test_testScheduler_runsActionsScheduledByActionsWithinTheWindow() {
        let scheduler = TestScheduler()
        let ran = Locked(false)
        scheduler.schedule(after: .seconds(1)) {
            scheduler.schedule(after: .seconds(1)) { ran.withLock { $0 = true } }
        }

        scheduler.advance(by: .seconds(2))

        XCTAssertTrue(ran.withLock { $0 })
    }

    func test_dispatchQueueScheduler_runsAfterDelayAndHonoursCancel() {
        let scheduler = DispatchQueueScheduler.global()
        let ran = expectation(description: "ran")
        let cancelledRan = Locked(false)
        let start = scheduler.now
        scheduler.schedule(after: .milliseconds(20)) {
            XCTAssertGreaterThanOrEqual(scheduler.now - start, .milliseconds(20))
            ran.fulfill()
        }
        scheduler.schedule(after: .milliseconds(10)) { cancelledRan.withLock { $0 = true } }.cancel()

        wait(for: [ran], timeout: .watchdog)
        XCTAssertFalse(cancelledRan.withLock { $0 })
    }

    func test_immediateScheduler_runsAtOnce() {
        let ran = Locked(0)
        ImmediateScheduler.immediate.schedule { ran.withLock { $0 += 1 } }
        ImmediateScheduler.immediate.schedule(after: .seconds(100)) { ran.withLock { $0 += 1 } }
        XCTAssertEqual(ran.withLock { $0 }, 2)
    }

    func test_mainQueueScheduler_hopsToMainFromBackground() {
        let ran = expectation(description: "on main")
        DispatchQueue.global().async {
            MainQueueScheduler.main.schedule {
                XCTAssertTrue(Thread.isMainThread)
                ran.fulfill()
            }
        }
        wait(for: [ran], timeout: .watchdog)
    }

    func test_mainQueueScheduler_delayedActionRunsOnMain() {
        let ran = expectation(description: "on main")
        MainQueueScheduler.main.schedule(after: .milliseconds(5)) {
            XCTAssertTrue(Thread.isMainThread)
            ran.fulfill()
        }
        wait(for: [ran], timeout: .watchdog)
    }
}
