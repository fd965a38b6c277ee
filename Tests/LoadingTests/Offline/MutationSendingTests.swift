import LoadingTestSupport
import XCTest

@testable import Loading

/// When a mutation queue may send, step by step, with no mutation, thread or storage: the invariants written at the
/// top of `MutationSending`.
final class MutationSendingTests: XCTestCase {
    private var sending = MutationSending()

    private var isOpen: Bool {
        if case .open = sending.gate(byBudget: false) { return true }
        return false
    }

    func test_oneAttemptAtATime_andOnlyTheOneRunningIsHandedOutBySerial() {
        XCTAssertTrue(isOpen)
        let first = sending.begin("a")
        XCTAssertFalse(isOpen, "an attempt runs")
        XCTAssertEqual(sending.id(of: first), "a")
        XCTAssertEqual(sending.takeAttempt()?.serial, first, "taken back (a logout, a discard)")

        let second = sending.begin("a")
        XCTAssertNotEqual(second, first)
        XCTAssertNil(sending.take(first), "a late answer of the attempt taken back")
        XCTAssertFalse(sending.keepToken(AnyCancellationToken {}, of: first))
        XCTAssertNil(sending.take(sending: "b"), "it sends a, not b")
        XCTAssertEqual(sending.take(second)?.id, "a")
        XCTAssertNil(sending.takeAttempt())
        XCTAssertTrue(isOpen)
    }

    func test_nothingBeginsWhileARetryIsWaitedFor_andATimerMadeAfterTheWaitIsNotKept() {
        sending.waitToRetry()
        XCTAssertFalse(isOpen)
        XCTAssertTrue(sending.keepRetry(AnyCancellationToken {}))
        XCTAssertNotNil(sending.endWaitToRetry(), "the timer, to cancel")
        XCTAssertTrue(isOpen)
        XCTAssertFalse(sending.keepRetry(AnyCancellationToken {}), "the wait ended meanwhile (the network came back)")
        XCTAssertNil(sending.endWaitToRetry())
    }

    func test_aClear_takesTheAttemptAndTheRetry_andNothingBeginsUntilEveryClearEnded() {
        _ = sending.begin("a")
        let taken = sending.beginClear()
        XCTAssertEqual(taken.attempt?.id, "a")
        _ = sending.beginClear()
        sending.endClear()
        XCTAssertFalse(isOpen, "one clear is still under way")
        sending.endClear()
        XCTAssertTrue(isOpen)
    }

    func test_whileABudgetRuns_onlyItBegins_andOnceItEnds_theQueueWaitsBeforeSendingOnItsOwn() {
        let watcher = SendingWatcher<String>()
        sending.beginBudget(watcher)
        guard case .heldForBudget = sending.gate(byBudget: false) else { return XCTFail("not held for the budget") }
        sending.waitToRetry()
        XCTAssertTrue(sending.keepRetry(AnyCancellationToken {}))
        let step = sending.nextStepWithinBudget()
        XCTAssertTrue(step.starts)
        XCTAssertNotNil(step.retry, "the retry timer it replaces")
        guard case .open = sending.gate(byBudget: true) else { return XCTFail("the budget begins") }
        _ = sending.begin("a")
        XCTAssertFalse(sending.nextStepWithinBudget().starts, "an attempt runs")
        _ = sending.takeAttempt()

        XCTAssertFalse(sending.endBudget(watcher, isOnline: false, hasMutations: true), "offline: no wait")
        XCTAssertTrue(sending.watchers.isEmpty)
        sending.beginBudget(watcher)
        XCTAssertTrue(sending.endBudget(watcher, isOnline: true, hasMutations: true))
        XCTAssertFalse(isOpen, "it waits its first retry delay")
    }
}
