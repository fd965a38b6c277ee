import LoadingTestSupport
import XCTest

@testable import Loading

final class StreamConcatTests: XCTestCase {
    func test_concat_sendsTheSecondStreamAfterTheFirstFinishes_andSubscribesItOnlyThen() {
        let subscribed = Locked(0)
        let second = EventStream<Int, TestError>.deferred {
            subscribed.withLock { $0 += 1 }
            return .sequence([3, 4])
        }
        let first = StreamSubject<Int, TestError>()
        let recorder = StreamRecorder(first.stream.concat(second))

        first.send(1)
        first.send(2)
        XCTAssertEqual(subscribed.withLock { $0 }, 0)
        first.send(completion: .finished)

        XCTAssertEqual(recorder.events, [.value(1), .value(2), .value(3), .value(4), .completion(.finished)])
    }

    func test_concat_aFailureEndsEverything_andTheSecondNeverStarts() {
        let subscribed = Locked(0)
        let second = EventStream<Int, TestError>.deferred {
            subscribed.withLock { $0 += 1 }
            return .just(9)
        }
        let recorder = StreamRecorder(EventStream<Int, TestError>.fail(TestError(id: 3)).concat(second))

        XCTAssertEqual(recorder.events, [.completion(.failure(TestError(id: 3)))])
        XCTAssertEqual(subscribed.withLock { $0 }, 0)
    }

    func test_cancel_reachesWhicheverStreamIsRunning() {
        let first = StreamSubject<Int, Never>()
        let second = StreamSubject<Int, Never>()
        let cancelled = Locked<[String]>([])
        let recorder = StreamRecorder(
            first.stream.handleEvents(receiveCancel: { cancelled.withLock { $0.append("first") } })
                .concat(second.stream.handleEvents(receiveCancel: { cancelled.withLock { $0.append("second") } })))

        first.send(completion: .finished)
        second.send(1)
        recorder.cancel()
        second.send(2)

        XCTAssertEqual(recorder.values, [1])
        XCTAssertEqual(cancelled.withLock { $0 }, ["second"])
    }

    func test_prependAndAppend_surroundTheStream() {
        let recorder = StreamRecorder(EventStream<Int, Never>.just(2).prepend(0, 1).append(3))

        XCTAssertEqual(recorder.events, [.value(0), .value(1), .value(2), .value(3), .completion(.finished)])
    }

    func test_cachedThenFresh_withoutRelyingOnJustBeingSynchronous() {
        let fresh = StreamSubject<[String], Never>()
        let recorder = StreamRecorder(fresh.stream.prepend(["cached"]))

        fresh.send(["fresh"])

        XCTAssertEqual(recorder.values, [["cached"], ["fresh"]])
    }
}
