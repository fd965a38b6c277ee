import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class ReceiveOnTests: XCTestCase {
    func test_receiveOn_deliversOnlyWhenTheSchedulerRuns() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.receive(on: scheduler))

        upstream.complete(with: 1)
        XCTAssertEqual(recorder.count, 0)
        scheduler.advance()

        XCTAssertEqual(recorder.values, [1])
    }

    func test_receiveOn_cancelDropsAResultAlreadyOnItsWay() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        let token = recorder.load(upstream.receive(on: scheduler))

        upstream.complete(with: 1)
        token.cancel()
        scheduler.advance()

        XCTAssertEqual(recorder.count, 0)
    }

    func test_receiveOn_dispatchQueue_deliversOnThatQueue() {
        let queue = DispatchQueue(label: "receive-on-test")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let upstream = LoaderSpy<Int>()
        let delivered = expectation(description: "delivered")
        upstream.receive(on: .queue(queue)).load { _ in
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), 7)
            delivered.fulfill()
        }

        upstream.complete(with: 1)

        wait(for: [delivered], timeout: .watchdog)
    }

    func test_dispatchOnMainQueue_deliversOnMainFromABackgroundThread() {
        let upstream = LoaderSpy<Int>()
        let delivered = expectation(description: "delivered")
        upstream.dispatchOnMainQueue().load { _ in
            XCTAssertTrue(Thread.isMainThread)
            delivered.fulfill()
        }

        DispatchQueue.global().async { upstream.complete(with: 1) }

        wait(for: [delivered], timeout: .watchdog)
    }

    func test_dispatchOnMainQueue_deliversInlineWhenOnMainWithNothingQueued() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.dispatchOnMainQueue())

        upstream.complete(with: 1)  // on the main thread, nothing queued: inline

        XCTAssertEqual(recorder.values, [1])
    }

    func test_dispatchOnMainQueue_keepsOrderWhenAResultIsQueuedAhead() {
        let first = LoaderSpy<Int>()
        let second = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        recorder.load(first.dispatchOnMainQueue())
        recorder.load(second.dispatchOnMainQueue())

        let queued = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            first.complete(with: 1)  // hops to main: queued behind this test's body
            queued.signal()
        }
        queued.wait()
        second.complete(with: 2)  // on main, but something is queued ahead: must not overtake it
        XCTAssertEqual(recorder.count, 0)
        spinMainQueue(until: { recorder.count == 2 })

        XCTAssertEqual(recorder.values, [1, 2])
    }

    func test_dispatchOnMainQueue_cancelDropsUndeliveredResult() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        let token = recorder.load(upstream.dispatchOnMainQueue())

        let queued = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            upstream.complete(with: 1)
            queued.signal()
        }
        queued.wait()
        token.cancel()
        drainMainQueue()  // what the cancelled delivery had queued there ran, and delivered nothing

        XCTAssertEqual(recorder.count, 0)
    }

}
