import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

final class SubjectTests: XCTestCase {
    func test_passthrough_multicastsOnlyWhatIsSentAfterSubscribing() {
        let subject = StreamSubject<Int, TestError>()
        subject.send(0)
        let first = StreamRecorder(subject.stream)
        subject.send(1)
        let second = StreamRecorder(subject.stream)
        subject.send(2)
        subject.send(completion: .finished)
        subject.send(3)

        XCTAssertEqual(first.events, [.value(1), .value(2), .completion(.finished)])
        XCTAssertEqual(second.events, [.value(2), .completion(.finished)])
    }

    func test_subscribersCancelledAmongOthers_getNothingMore_whileTheRestAndNewcomersGetEverything() {
        let subject = CurrentValueStreamSubject<Int, TestError>(0)
        let recorders = (0..<100).map { _ in StreamRecorder(subject.stream) }
        for (index, recorder) in recorders.enumerated() where !index.isMultiple(of: 2) { recorder.cancel() }
        subject.send(1)
        for (index, recorder) in recorders.enumerated() where index.isMultiple(of: 2) && index != 50 {
            recorder.cancel()
        }
        let newcomer = StreamRecorder(subject.stream)
        subject.send(2)
        recorders[50].cancel()
        subject.send(3)

        for (index, recorder) in recorders.enumerated() {
            let expected = index.isMultiple(of: 2) ? (index == 50 ? [0, 1, 2] : [0, 1]) : [0]
            XCTAssertEqual(recorder.values, expected, "subscriber \(index)")
        }
        XCTAssertEqual(newcomer.values, [1, 2, 3], "the current value replayed to it, then the rest")
        subject.send(completion: .finished)
        XCTAssertEqual(newcomer.completion, .finished)
        XCTAssertNil(recorders[50].completion, "cancelled before the completion")
    }

    func test_subscriberAfterCompletion_getsOnlyTheCompletion() {
        let subject = StreamSubject<Int, TestError>()
        subject.send(1)
        subject.send(completion: .failure(TestError(id: 4)))
        XCTAssertEqual(StreamRecorder(subject.stream).events, [.completion(.failure(TestError(id: 4)))])

        let current = CurrentValueStreamSubject<Int, TestError>(1)
        current.send(completion: .finished)
        XCTAssertEqual(StreamRecorder(current.stream).events, [.completion(.finished)])
    }

    func test_currentValue_replaysCurrentValueThenLaterOnes() {
        let subject = CurrentValueStreamSubject<Int, TestError>(1)
        let early = StreamRecorder(subject.stream)
        subject.value = 2
        let late = StreamRecorder(subject.stream)
        subject.send(3)

        XCTAssertEqual(early.values, [1, 2, 3])
        XCTAssertEqual(late.values, [2, 3])
        XCTAssertEqual(subject.value, 3)
    }

    func test_cancelledSubscriber_receivesNothingMoreAndIsReleased() {
        let subject = StreamSubject<Int, Never>()
        weak var weakMarker: Marker?
        var subscription: StreamSubscription?
        let received = Locked<[Int]>([])
        do {
            let marker = Marker()
            weakMarker = marker
            subscription = subject.stream.sink { value in
                marker.touch()
                received.withLock { $0.append(value) }
            }
        }
        subject.send(1)
        subscription?.cancel()
        subject.send(2)
        subscription = nil

        XCTAssertEqual(received.withLock { $0 }, [1])
        XCTAssertNil(weakMarker, "the subject must forget a cancelled subscriber")
    }

    func test_sendsFromManyThreads_reachEverySubscriberOnceInTheSameOrderWithoutOverlap() {
        let subject = StreamSubject<Int, Never>()
        let recorders = (0..<3).map { _ in StreamRecorder(subject.stream) }
        let threads = 8
        let perThread = 2_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread { subject.send(thread * perThread + index) }
        }
        subject.send(completion: .finished)

        for recorder in recorders {
            XCTAssertEqual(recorder.values.count, threads * perThread)
            XCTAssertEqual(Set(recorder.values).count, threads * perThread)
            XCTAssertEqual(recorder.overlappingDeliveries, 0)
            XCTAssertEqual(recorder.values, recorders[0].values, "every subscriber sees the same order")
        }
    }

    func test_subscribersJoiningAndCancellingWhileOthersSend_staySafe() {
        let subject = CurrentValueStreamSubject<Int, Never>(0)
        let stable = StreamRecorder(subject.stream)
        let group = DispatchGroup()
        for thread in 0..<4 {
            group.enter()
            Thread {
                for index in 0..<2_000 { subject.send(thread * 10_000 + index) }
                group.leave()
            }.start()
        }
        for _ in 0..<4 {
            group.enter()
            Thread {
                for _ in 0..<300 {
                    let churn = StreamRecorder(subject.stream)
                    XCTAssertEqual(churn.overlappingDeliveries, 0)
                    churn.cancel()
                }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success)

        XCTAssertEqual(stable.values.count, 8_001)
        XCTAssertEqual(stable.overlappingDeliveries, 0)
    }

    func test_sendsFromInsideADelivery_reachEverySubscriberAfterItInOrder() {
        let subject = StreamSubject<Int, TestError>()
        let sender = subject.stream.sink(
            receiveCompletion: { _ in },
            receiveValue: { value in
                guard value == 1 else { return }
                subject.send(2)
                subject.send(completion: .failure(TestError(id: 7)))
                subject.send(3)
            })
        let recorder = StreamRecorder(subject.stream)

        subject.send(1)

        XCTAssertEqual(recorder.events, [.value(1), .value(2), .completion(.failure(TestError(id: 7)))])
        withExtendedLifetime(sender) {}
    }

    func test_subscribingInsideADelivery_getsTheCurrentValueAfterItThenLaterOnes() {
        let subject = CurrentValueStreamSubject<String, Never>("a")
        let joined = Locked<StreamRecorder<String, Never>?>(nil)
        let joiner = subject.stream.sink { value in
            guard value == "b" else { return }
            joined.withLock { $0 = StreamRecorder(subject.stream) }
        }

        subject.send("b")
        subject.send("c")

        XCTAssertEqual(joined.withLock { $0 }?.values, ["b", "c"])
        XCTAssertEqual(subject.value, "c")
        withExtendedLifetime(joiner) {}
    }

    func test_updatesFromManyThreads_eachApplyOnceAndArriveInOrder() {
        let subject = CurrentValueStreamSubject<Int, Never>(0)
        let recorder = StreamRecorder(subject.stream)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<1_000 { subject.update { $0 + 1 } }
        }

        XCTAssertEqual(subject.value, 4_000)
        XCTAssertEqual(recorder.values, Array(0...4_000), "every update is sent once, in the order applied")
        XCTAssertNil(subject.update { _ in nil }, "an update that declines sends nothing")
        XCTAssertEqual(recorder.values.count, 4_001)
    }
}
