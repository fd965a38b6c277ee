import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

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
        await fulfillment(of: [firstValue], timeout: .watchdog)

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
            .handleEvents(receiveCompletion: { completion in
                if case .failure(let error) = completion { logged.withLock { $0.append(error.id) } }
            })
            .fallback(to: EventStream<Int, TestError>.just(7).eraseErrorType().caching(to: cache))
        let recorder = StreamRecorder(stream)
        XCTAssertEqual(recorder.values, [7])
        XCTAssertNotNil(recorder.completion)
        XCTAssertEqual(cache.savedValues, [7])
        XCTAssertEqual(logged.withLock { $0 }, [1])
    }

    func test_caching_neverSavesFailureAndReportsSaveFailures() {
        let failingCache = CacheSpy<Int>(completingWith: .failure(TestError(id: 2)))
        let reported = Locked<[Int]>([])
        let stream = EventStream<Int, TestError>.sequence([1]).merge(with: .fail(anyError)).eraseErrorType()
            .caching(
                to: failingCache,
                policy: .reportFailures { error in reported.withLock { $0.append((error as? TestError)?.id ?? -1) } })
        _ = StreamRecorder(stream)
        XCTAssertEqual(failingCache.savedValues, [1])
        XCTAssertEqual(reported.withLock { $0 }, [2])
    }

    func test_cachingFailLoad_passesEachValueOnOnceSaved_inOrder() {
        let cache = CacheSpy<Int>(completingWith: nil)
        let subject = StreamSubject<Int, any Error>()
        let recorder = StreamRecorder(subject.stream.caching(to: cache, policy: .failLoad))

        subject.send(1)
        subject.send(2)
        subject.send(completion: .finished)
        XCTAssertEqual(cache.savedValues, [1], "one save at a time")
        XCTAssertEqual(recorder.events.count, 0, "nothing passes before its save")

        cache.completeSave(with: .success(()))
        XCTAssertEqual(recorder.values, [1])
        XCTAssertEqual(cache.savedValues, [1, 2])
        XCTAssertNil(recorder.completion, "the finish waits for the last save")

        cache.completeSave(with: .success(()))
        XCTAssertEqual(recorder.values, [1, 2])
        XCTAssertNotNil(recorder.completion)
        XCTAssertEqual(recorder.overlappingDeliveries, 0)
    }

    func test_cachingFailLoad_failsWithTheSavesErrorAndCancelsTheUpstream() {
        let cache = CacheSpy<Int>(completingWith: nil)
        let subject = StreamSubject<Int, any Error>()
        let cancelled = Locked(false)
        let recorder = StreamRecorder(
            subject.stream.handleEvents(receiveCancel: { cancelled.withLock { $0 = true } })
                .caching(to: cache, policy: .failLoad))

        subject.send(1)
        cache.completeSave(with: .failure(TestError(id: 9)))

        XCTAssertEqual(recorder.values, [])
        guard case .failure(let error) = recorder.completion else { return XCTFail("expected the save's failure") }
        XCTAssertEqual(error as? TestError, TestError(id: 9))
        XCTAssertTrue(cancelled.withLock { $0 })
    }

    func test_cachingFailLoad_afterCancel_deliversNothingAndStartsNoFurtherSave() {
        let cache = CacheSpy<Int>(completingWith: nil)
        let subject = StreamSubject<Int, any Error>()
        let recorder = StreamRecorder(subject.stream.caching(to: cache, policy: .failLoad))
        subject.send(1)
        subject.send(2)

        recorder.cancel()
        cache.completeSave(with: .success(()))

        XCTAssertEqual(recorder.events.count, 0)
        XCTAssertEqual(cache.savedValues, [1])
    }

    func test_cachingFailLoad_savesAManyValueBacklogWithoutNesting_whenEachSaveCompletesInItsCall() {
        let cache = FirstSaveHeldCache()
        let subject = StreamSubject<Int, any Error>()
        let recorder = StreamRecorder(subject.stream.caching(to: cache, policy: .failLoad))
        let count = 20_000
        for value in 0..<count { subject.send(value) }
        subject.send(completion: .finished)

        cache.completeFirstSave()

        XCTAssertEqual(recorder.values, Array(0..<count), "each value passes once saved, in order")
        guard case .finished = recorder.completion else { return XCTFail("the finish passes after the last save") }
        XCTAssertEqual(cache.savedCount, count)
        XCTAssertEqual(cache.deepestNesting, 1, "a save completing in its call does not start the next inside it")
    }

    func test_debouncedCachingFailLoad_failsTheStreamWhenTheSaveFails() {
        let cache = CacheSpy<Int>(completingWith: .failure(TestError(id: 4)))
        let scheduler = TestScheduler()
        let subject = StreamSubject<Int, any Error>()
        let recorder = StreamRecorder(
            subject.stream.caching(to: cache, debounce: .seconds(1), scheduler: scheduler, policy: .failLoad))

        subject.send(1)
        subject.send(2)
        scheduler.advance(by: .seconds(1))

        XCTAssertEqual(recorder.values, [1, 2])
        XCTAssertEqual(cache.savedValues, [2])
        guard case .failure(let error) = recorder.completion else { return XCTFail("expected the save's failure") }
        XCTAssertEqual(error as? TestError, TestError(id: 4))
    }
}

/// A cache whose first save waits to be completed, and whose later saves complete within their call; it records how
/// deeply calls to `save` nest.
private final class FirstSaveHeldCache: Cache {
    private struct State {
        var held: (@Sendable (Result<Void, any Error>) -> Void)?
        var saved = 0
        var nesting = 0
        var deepest = 0
    }

    private let state = Locked(State())

    var savedCount: Int { state.withLock { $0.saved } }
    var deepestNesting: Int { state.withLock { $0.deepest } }

    func save(_ value: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let isFirst = state.withLock { state in
            state.saved += 1
            state.nesting += 1
            state.deepest = max(state.deepest, state.nesting)
            guard state.saved == 1 else { return false }
            state.held = completion
            return true
        }
        if !isFirst { completion(.success(())) }
        state.withLock { $0.nesting -= 1 }
    }

    func completeFirstSave() {
        state.withLock { $0.held.take() }?(.success(()))
    }
}
