import Loading
import LoadingTestSupport
import XCTest

final class TimeoutTests: XCTestCase {
    func test_failsWithTimeoutErrorAndCancelsLoadWhenTimeRunsOut() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.timeout(after: .seconds(5), scheduler: scheduler))

        scheduler.advance(by: .milliseconds(4999))
        XCTAssertEqual(recorder.count, 0)
        scheduler.advance(by: .milliseconds(1))
        upstream.complete(with: 1)

        assertError(recorder.all.first, TimeoutError(interval: .seconds(5)))
        XCTAssertEqual(recorder.count, 1)
        XCTAssertEqual(upstream.cancelledRequests, [0])
    }

    func test_deliversValueInTimeAndCancelsTheTimer() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.timeout(after: .seconds(5), scheduler: scheduler))

        upstream.complete(with: 1)
        scheduler.run()

        XCTAssertEqual(recorder.values, [1])
        XCTAssertEqual(scheduler.pendingCount, 0)
    }

    func test_cancel_cancelsLoadAndTimerAndNeverCompletes() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        let token = recorder.load(upstream.timeout(after: .seconds(5), scheduler: scheduler))

        token.cancel()
        scheduler.run()
        upstream.complete(with: 1)

        XCTAssertEqual(upstream.cancelledRequests, [0])
        XCTAssertEqual(scheduler.pendingCount, 0)
        XCTAssertEqual(recorder.count, 0)
    }

    func test_token_isReleasedAfterTimeout() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        upstream.timeout(after: .seconds(1), scheduler: scheduler).load(completion: completionTrackedForLeaks())
        scheduler.run()
        trackForMemoryLeaks(upstream)
    }
}
