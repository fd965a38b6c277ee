import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class StreamConcurrencyTests: XCTestCase {
    func test_mergeFedFromEightThreads_deliversEveryValueWithoutOverlap() {
        let threads = 8
        let perThread = 10_000
        let subjects = (0..<threads).map { _ in StreamSubject<Int, Never>() }
        let recorder = StreamRecorder(EventStream.merge(subjects.map(\.stream)))
        let group = DispatchGroup()
        for (thread, subject) in subjects.enumerated() {
            group.enter()
            Thread {
                for index in 0..<perThread { subject.send(thread * perThread + index) }
                subject.send(completion: .finished)
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success)

        XCTAssertEqual(recorder.values.count, threads * perThread)
        XCTAssertEqual(Set(recorder.values).count, threads * perThread)
        XCTAssertEqual(recorder.overlappingDeliveries, 0)
        XCTAssertEqual(recorder.completion, .finished)
        for thread in 0..<threads {
            let fromThread = recorder.values.filter { $0 / perThread == thread }
            XCTAssertEqual(fromThread, fromThread.sorted(), "each source's order is kept")
        }
    }

    func test_cancelFromAnotherThread_noEventStartsAfterCancelReturns() {
        for _ in 0..<200 {
            let subject = StreamSubject<Int, Never>()
            let cancelled = Locked(false)
            let late = Locked(0)
            let subscription = subject.stream.map { $0 + 1 }.sink { _ in
                if cancelled.withLock({ $0 }) { late.withLock { $0 += 1 } }
            }
            let sent = DispatchSemaphore(value: 0)
            let sender = Thread {
                for index in 0..<500 { subject.send(index) }
                sent.signal()
            }
            sender.start()
            subscription.cancel()
            cancelled.withLock { $0 = true }
            sent.wait()
            // Deliveries never overlap, so at most the one already under way when cancel was called may finish
            // after it; none may start afterwards (without the check, hundreds would).
            XCTAssertLessThanOrEqual(late.withLock { $0 }, 1)
        }
    }
}
