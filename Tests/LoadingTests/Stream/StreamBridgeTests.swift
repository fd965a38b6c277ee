import Loading
import LoadingTestSupport
import XCTest

final class StreamBridgeTests: XCTestCase {
    func test_loaderAsStream_isLazyAndSendsValueThenFinishes() {
        let loader = LoaderSpy<Int>()
        let stream = loader.asStream()
        XCTAssertEqual(loader.loadCount, 0, "nothing runs before a subscription")

        let recorder = StreamRecorder(stream.mapError { $0 as? TestError ?? TestError(id: -1) })
        loader.complete(with: 1)

        XCTAssertEqual(recorder.events, [.value(1), .completion(.finished)])
    }

    func test_loaderAsStream_cancellingSubscriptionCancelsLoad() {
        let loader = LoaderSpy<Int>()
        let recorder = StreamRecorder(loader.asStream())
        recorder.cancel()
        loader.complete(with: 1)
        XCTAssertEqual(loader.cancelledRequests, [0])
        XCTAssertEqual(recorder.events.count, 0)
    }

    func test_streamAsLoader_deliversFirstValueAndCancelsSubscription() {
        let subject = StreamSubject<Int, TestError>()
        let cancelled = Locked(false)
        let recorder = LoadRecorder<Int>()
        recorder.load(subject.stream.handleEvents(receiveCancel: { cancelled.withLock { $0 = true } }).asLoader())
        subject.send(5)
        subject.send(6)
        XCTAssertEqual(recorder.values, [5])
        XCTAssertTrue(cancelled.withLock { $0 })
    }

    func test_streamAsLoader_failureAndEmptyFinish() {
        let recorder = LoadRecorder<Int>()
        recorder.load(EventStream<Int, TestError>.fail(TestError(id: 3)).asLoader())
        recorder.load(EventStream<Int, TestError>.empty().asLoader())
        assertError(recorder.all.first, TestError(id: 3))
        assertError(recorder.all.last, StreamFinishedWithoutValueError())
    }

    func test_streamAsLoader_cancelledLoadNeverCompletes() {
        let subject = StreamSubject<Int, TestError>()
        let recorder = LoadRecorder<Int>()
        recorder.load(subject.stream.asLoader()).cancel()
        subject.send(1)
        XCTAssertEqual(recorder.count, 0)
    }

    func test_values_iteratesAndThrowsFailure() async {
        var received: [Int] = []
        do {
            for try await value in EventStream<Int, TestError>.sequence([1, 2]).merge(with: .fail(TestError(id: 9)))
                .values
            {
                received.append(value)
            }
            XCTFail("expected a failure")
        } catch {
            XCTAssertEqual(error as? TestError, TestError(id: 9))
        }
        XCTAssertEqual(received, [1, 2])
    }

    func test_values_cancellingTheTaskCancelsTheSubscription() async {
        let subject = CurrentValueStreamSubject<Int, Never>(1)
        let cancelled = Locked(false)
        let firstValue = expectation(description: "first value")
        let stream = subject.stream.handleEvents(receiveCancel: { cancelled.withLock { $0 = true } })
        let task = Task {
            for await _ in stream.values { firstValue.fulfill() }
        }
        await fulfillment(of: [firstValue], timeout: 5)

        task.cancel()
        _ = await task.result

        XCTAssertTrue(cancelled.withLock { $0 })
    }

    func test_value_awaitsFirstValue() async throws {
        let value = try await EventStream<Int, TestError>.sequence([4, 5]).value
        XCTAssertEqual(value, 4)
    }

    func test_fallbackCachingAndLogErrors_onStreams() {
        let cache = CacheSpy<Int>()
        let logged = Locked<[Int]>([])
        let stream = EventStream<Int, TestError>.fail(TestError(id: 1))
            .logErrors { error in logged.withLock { $0.append(error.id) } }
            .fallback(to: EventStream<Int, TestError>.just(7).caching(to: cache))
        XCTAssertEqual(StreamRecorder(stream).events, [.value(7), .completion(.finished)])
        XCTAssertEqual(cache.savedValues, [7])
        XCTAssertEqual(logged.withLock { $0 }, [1])
    }

    func test_caching_neverSavesFailureAndReportsSaveFailures() {
        let failingCache = CacheSpy<Int>(completingWith: .failure(TestError(id: 2)))
        let reported = Locked<[Int]>([])
        let stream = EventStream<Int, TestError>.sequence([1]).merge(with: .fail(anyError))
            .caching(to: failingCache) { error in reported.withLock { $0.append((error as? TestError)?.id ?? -1) } }
        _ = StreamRecorder(stream)
        XCTAssertEqual(failingCache.savedValues, [1])
        XCTAssertEqual(reported.withLock { $0 }, [2])
    }
}
