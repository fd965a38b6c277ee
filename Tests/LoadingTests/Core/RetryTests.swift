import LoadingTestSupport
import XCTest

@testable import Loading

final class RetryTests: XCTestCase {
    func test_load_deliversFirstSuccessWithoutRetrying() {
        let (sut, upstream, scheduler) = makeSUT(.immediate(maxAttempts: 3))
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        upstream.complete(with: "value")
        scheduler.run()

        XCTAssertEqual(upstream.loadCount, 1)
        XCTAssertEqual(recorder.values, ["value"])
    }

    func test_load_retriesUntilSuccess() {
        let (sut, upstream, _) = makeSUT(.immediate(maxAttempts: 3))
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        upstream.fail(with: anyError)
        upstream.fail(with: anyError)
        upstream.complete(with: "third time")

        XCTAssertEqual(upstream.loadCount, 3)
        XCTAssertEqual(recorder.values, ["third time"])
    }

    func test_load_deliversLastErrorWhenAttemptsRunOut() {
        let (sut, upstream, _) = makeSUT(.immediate(maxAttempts: 2))
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        upstream.fail(with: TestError(id: 1))
        upstream.fail(with: TestError(id: 2))

        XCTAssertEqual(upstream.loadCount, 2)
        assertError(recorder.all.first, TestError(id: 2))
        XCTAssertEqual(recorder.count, 1)
    }

    func test_load_failsAtOnceWithErrorThePolicyDoesNotRetry() {
        let policy = RetryPolicy.immediate(maxAttempts: 5).retrying { ($0 as? TestError)?.id != 404 }
        let (sut, upstream, _) = makeSUT(policy)
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        upstream.fail(with: TestError(id: 500))
        upstream.fail(with: TestError(id: 404))

        XCTAssertEqual(upstream.loadCount, 2)
        assertError(recorder.all.first, TestError(id: 404))
    }

    func test_exponentialBackoff_waitsExactDelaysCappedAtMaxDelay() {
        let policy = RetryPolicy.exponential(initial: .milliseconds(200), maxDelay: .milliseconds(800), maxAttempts: 5)
        let (sut, upstream, scheduler) = makeSUT(policy)
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        for (attempt, delay) in [200, 400, 800, 800].enumerated() {
            upstream.fail(with: anyError)
            scheduler.advance(by: .milliseconds(delay - 1))
            XCTAssertEqual(upstream.loadCount, attempt + 1, "attempt \(attempt + 2) started early")
            scheduler.advance(by: .milliseconds(1))
            XCTAssertEqual(upstream.loadCount, attempt + 2, "attempt \(attempt + 2) did not start on time")
        }
        upstream.complete(with: "value")

        XCTAssertEqual(scheduler.scheduledDelays, [200, 400, 800, 800].map { .milliseconds($0) })
        XCTAssertEqual(recorder.values, ["value"])
    }

    func test_constantBackoff_waitsTheSameDelayEachTime() {
        let (sut, upstream, scheduler) = makeSUT(.constant(.seconds(1), maxAttempts: 3))
        LoadRecorder<String>().load(sut)

        upstream.fail(with: anyError)
        scheduler.advance(by: .seconds(1))
        upstream.fail(with: anyError)
        scheduler.advance(by: .seconds(1))

        XCTAssertEqual(upstream.loadCount, 3)
        XCTAssertEqual(scheduler.scheduledDelays, [.seconds(1), .seconds(1)])
        upstream.complete(with: "value")
    }

    func test_jitter_shortensDelayWithinItsFraction() {
        let backoff = Backoff.exponential(initial: .seconds(1), multiplier: 2, maxDelay: .seconds(10), jitter: 0.5)
        for _ in 0..<200 {
            let delay = backoff.delay(beforeRetry: 2)
            XCTAssertGreaterThanOrEqual(delay, .seconds(1))
            XCTAssertLessThanOrEqual(delay, .seconds(2))
        }
        let distinct = Set((0..<50).map { _ in backoff.delay(beforeRetry: 1) })
        XCTAssertGreaterThan(distinct.count, 1, "jitter should vary the delay")
    }

    func test_cancelDuringDelay_startsNoNewAttemptAndNeverCompletes() {
        let (sut, upstream, scheduler) = makeSUT(.constant(.seconds(1), maxAttempts: 3))
        let recorder = LoadRecorder<String>()
        let token = recorder.load(sut)

        upstream.fail(with: anyError)
        token.cancel()
        scheduler.advance(by: .seconds(10))

        XCTAssertEqual(upstream.loadCount, 1)
        XCTAssertEqual(scheduler.pendingCount, 0, "the pending delay should be cancelled")
        XCTAssertEqual(recorder.count, 0)
    }

    func test_cancelDuringAttempt_cancelsItAndNeverCompletes() {
        let (sut, upstream, scheduler) = makeSUT(.constant(.seconds(1), maxAttempts: 3))
        let recorder = LoadRecorder<String>()
        let token = recorder.load(sut)

        upstream.fail(with: anyError)
        scheduler.advance(by: .seconds(1))
        token.cancel()
        upstream.fail(with: anyError)
        scheduler.run()

        XCTAssertEqual(upstream.cancelledRequests, [1])
        XCTAssertEqual(upstream.loadCount, 2)
        XCTAssertEqual(recorder.count, 0)
    }

    func test_token_isReleasedAfterCompletionAndCancel() {
        let (sut, upstream, scheduler) = makeSUT(.constant(.seconds(1), maxAttempts: 3))
        sut.load(completion: completionTrackedForLeaks())
        upstream.fail(with: anyError)
        scheduler.run()
        upstream.complete(with: "value")

        let cancelled = sut.load(completion: completionTrackedForLeaks())
        upstream.fail(with: anyError)
        cancelled.cancel()
    }

    private func makeSUT(
        _ policy: RetryPolicy,
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> (RetryLoader<LoaderSpy<String>>, LoaderSpy<String>, TestScheduler) {
        let upstream = LoaderSpy<String>()
        let scheduler = TestScheduler()
        trackForMemoryLeaks(upstream, file: file, line: line)
        trackForMemoryLeaks(scheduler, file: file, line: line)
        return (upstream.retry(policy, scheduler: scheduler), upstream, scheduler)
    }
}
