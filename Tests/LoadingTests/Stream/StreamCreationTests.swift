import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

final class StreamCreationTests: XCTestCase {
    typealias Events = [StreamEvent<Int, TestError>]

    func test_just_sendsValueThenFinishes() {
        XCTAssertEqual(StreamRecorder(EventStream<Int, TestError>.just(1)).events, [.value(1), .completion(.finished)])
    }

    func test_fail_failsAtOnce() {
        XCTAssertEqual(
            StreamRecorder(EventStream<Int, TestError>.fail(TestError(id: 1))).events,
            [.completion(.failure(TestError(id: 1)))])
    }

    func test_empty_finishesOrNeverSendsAnything() {
        XCTAssertEqual(StreamRecorder(EventStream<Int, TestError>.empty()).events, [.completion(.finished)])
        XCTAssertEqual(StreamRecorder(EventStream<Int, TestError>.empty(completeImmediately: false)).events, [])
    }

    func test_sequence_sendsElementsInOrderThenFinishes() {
        XCTAssertEqual(
            StreamRecorder(EventStream<Int, TestError>.sequence([1, 2, 3])).events,
            [.value(1), .value(2), .value(3), .completion(.finished)])
    }

    func test_sequence_stopsAsSoonAsTheSubscriptionEnds() {
        let produced = Locked(0)
        let stream = EventStream<Int, TestError>.sequence(1...1_000_000)
            .handleEvents(receiveOutput: { _ in produced.withLock { $0 += 1 } })
            .first { $0 == 3 }

        XCTAssertEqual(StreamRecorder(stream).events, [.value(3), .completion(.finished)])
        XCTAssertEqual(produced.withLock { $0 }, 3)
    }

    func test_deferred_runsFactoryPerSubscription() {
        let calls = Locked(0)
        let stream = EventStream<Int, TestError>.deferred {
            let call = calls.withLock { calls -> Int in
                calls += 1
                return calls
            }
            return .just(call)
        }
        XCTAssertEqual(calls.withLock { $0 }, 0, "nothing runs before a subscription")

        XCTAssertEqual(StreamRecorder(stream).values, [1])
        XCTAssertEqual(StreamRecorder(stream).values, [2])
    }

    func test_future_runsAtCreationAndReplaysFirstResultToLateSubscribers() {
        let runs = Locked(0)
        let promise = Locked<(@Sendable (Result<Int, TestError>) -> Void)?>(nil)
        let future = EventStream<Int, TestError>.future { fulfil in
            runs.withLock { $0 += 1 }
            promise.withLock { $0 = fulfil }
        }
        XCTAssertEqual(runs.withLock { $0 }, 1, "a future runs at creation")

        let early = StreamRecorder(future)
        promise.withLock { $0 }?(.success(1))
        promise.withLock { $0 }?(.success(2))  // later results are ignored
        let late = StreamRecorder(future)

        XCTAssertEqual(early.events, [.value(1), .completion(.finished)])
        XCTAssertEqual(late.events, [.value(1), .completion(.finished)])
        XCTAssertEqual(runs.withLock { $0 }, 1)
    }

    func test_future_cancelledSubscriberReceivesNothingAndIsReleased() {
        let promise = Locked<(@Sendable (Result<Int, TestError>) -> Void)?>(nil)
        let future = EventStream<Int, TestError>.future { fulfil in promise.withLock { $0 = fulfil } }
        weak var weakMarker: Marker?
        var subscription: StreamSubscription?
        do {
            let marker = Marker()
            weakMarker = marker
            subscription = future.sink(
                receiveCompletion: { _ in marker.touch() }, receiveValue: { _ in marker.touch() })
        }

        subscription?.cancel()
        subscription = nil
        XCTAssertNil(weakMarker, "the future must forget a cancelled subscriber")
        promise.withLock { $0 }?(.success(1))
    }

    func test_task_sendsResultAndFinishes() async throws {
        let value = try await EventStream.task { 42 }.value
        XCTAssertEqual(value, 42)
    }

    func test_task_cancellingTheSubscriptionCancelsTheTask() {
        let started = expectation(description: "started")
        let dropped = expectation(description: "the value the task returned after the cancel was dropped")
        let stream = EventStream<DeinitProbe, any Error>.task {
            started.fulfill()
            while !Task.isCancelled { await Task.yield() }
            return DeinitProbe { dropped.fulfill() }  // sent, the recorder would keep it
        }
        let recorder = StreamRecorder(stream)
        wait(for: [started], timeout: .watchdog)

        recorder.cancel()
        wait(for: [dropped], timeout: .watchdog)

        XCTAssertEqual(recorder.events.count, 0)
    }

    func test_elements_sendsEachElementThenFinishes_andEachSubscriptionIteratesAnew() async throws {
        let numbers = AsyncStream<Int> { continuation in
            for number in 1...3 { continuation.yield(number) }
            continuation.finish()
        }
        let stream = EventStream.elements(of: numbers)
        var received: [Int] = []
        for try await number in stream.values { received.append(number) }
        XCTAssertEqual(received, [1, 2, 3])

        let counting = EventStream.elements(of: Countdown(from: 2))
        let first = try await counting.values.reduce(into: [Int]()) { $0.append($1) }
        let second = try await counting.values.reduce(into: [Int]()) { $0.append($1) }
        XCTAssertEqual(first, [2, 1])
        XCTAssertEqual(second, [2, 1], "a new subscription iterates the sequence anew")
    }

    func test_elements_failsWhenTheSequenceThrows() async {
        let failing = AsyncThrowingStream<Int, any Error> { continuation in
            continuation.yield(1)
            continuation.finish(throwing: TestError(id: 4))
        }
        var received: [Int] = []
        do {
            for try await number in EventStream.elements(of: failing).values { received.append(number) }
            XCTFail("expected a failure")
        } catch {
            XCTAssertEqual(error as? TestError, TestError(id: 4))
        }
        XCTAssertEqual(received, [1])
    }
}

/// An async sequence counting down to 1.
private struct Countdown: AsyncSequence, Sendable {
    let from: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var next: Int
        mutating func next() async -> Int? {
            guard next > 0 else { return nil }
            defer { next -= 1 }
            return next
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(next: from) }
}

/// An object whose lifetime a test watches.
final class Marker: Sendable {
    func touch() {}
}
