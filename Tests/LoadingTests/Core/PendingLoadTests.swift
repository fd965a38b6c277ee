import Loading
import XCTest

/// The written contract of `PendingLoad`, the state a loader keeps for one load in flight.
final class PendingLoadTests: XCTestCase {
    func test_complete_deliversOnce() {
        let results = Locked<[Int]>([])
        let pending = PendingLoad<Int> { result in results.withLock { $0.append((try? result.get()) ?? -1) } }

        pending.complete(.success(1))
        pending.complete(.success(2))

        XCTAssertEqual(results.withLock { $0 }, [1])
        XCTAssertTrue(pending.isFinished)
    }

    func test_cancel_reachesTheStepInFlight_andNothingIsDeliveredAfterIt() {
        let delivered = Locked(0)
        let stepCancels = Locked(0)
        let pending = PendingLoad<Int> { _ in delivered.withLock { $0 += 1 } }
        pending.startStep { AnyCancellationToken { stepCancels.withLock { $0 += 1 } } }

        pending.cancel()
        pending.complete(.success(1))

        XCTAssertEqual(stepCancels.withLock { $0 }, 1)
        XCTAssertEqual(delivered.withLock { $0 }, 0)
    }

    func test_cancelWhileAStepStarts_cancelsThatStepWhenItsStartReturns() {
        let stepCancels = Locked(0)
        let pending = PendingLoad<Int> { _ in XCTFail("a cancelled load delivered") }

        pending.startStep {
            pending.cancel()
            XCTAssertEqual(stepCancels.withLock { $0 }, 0, "the token does not exist yet")
            return AnyCancellationToken { stepCancels.withLock { $0 += 1 } }
        }

        XCTAssertEqual(stepCancels.withLock { $0 }, 1)
    }

    func test_aStepThatCompletedTheLoadBeforeItsStartReturned_isNotCancelled() {
        let stepCancels = Locked(0)
        let delivered = Locked(0)
        let pending = PendingLoad<Int> { _ in delivered.withLock { $0 += 1 } }

        pending.startStep {
            pending.complete(.success(1))
            return AnyCancellationToken { stepCancels.withLock { $0 += 1 } }
        }

        XCTAssertEqual(delivered.withLock { $0 }, 1)
        XCTAssertEqual(stepCancels.withLock { $0 }, 0, "the step is over; cancelling it would be wasted work")
    }

    func test_aStepStartedFromThePreviousStepsCompletion_isTheOneACancelReaches() {
        let firstCancels = Locked(0)
        let secondCancels = Locked(0)
        let pending = PendingLoad<Int> { _ in XCTFail("a cancelled load delivered") }

        pending.startStep {
            // The first step finishes at once and starts the second, which stays in flight.
            pending.startStep { AnyCancellationToken { secondCancels.withLock { $0 += 1 } } }
            return AnyCancellationToken { firstCancels.withLock { $0 += 1 } }
        }
        pending.cancel()

        XCTAssertEqual(secondCancels.withLock { $0 }, 1)
        XCTAssertEqual(firstCancels.withLock { $0 }, 0)
    }

    func test_noStepStartsOnceTheLoadFinished() {
        let pending = PendingLoad<Int> { _ in }
        pending.complete(.success(1))

        var started = false
        pending.startStep {
            started = true
            return AnyCancellationToken {}
        }

        XCTAssertFalse(started)
    }

    func test_finishing_releasesTheCompletion_evenWhileTheTokenIsKept() {
        for finish in [{ (pending: PendingLoad<Int>) in pending.complete(.success(1)) }, { $0.cancel() }] {
            let released = Locked(false)
            var probe: DeinitProbe? = DeinitProbe { released.withLock { $0 = true } }
            let pending = PendingLoad<Int> { [probe] _ in probe?.touch() }
            probe = nil
            XCTAssertFalse(released.withLock { $0 })

            finish(pending)

            XCTAssertTrue(released.withLock { $0 }, "the completion is released when the load finishes")
            withExtendedLifetime(pending) {}
        }
    }
}
