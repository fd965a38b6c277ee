import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Retry at its limits: any number of synchronous failures in constant stack depth, "for ever" without overflow, a
/// delay an error asks for, and attempts that start over after a healthy run.
final class RetryLimitsTests: XCTestCase {
    /// Far more failures than a stack holds frames, were retries to recurse (LOADING_TEST_SCALE scales it).
    private let failures = scaled(1_000_000, floor: 100_000)

    func test_loaderRetry_survivesAMillionSynchronousFailures_andDeliversTheSuccessAfterThem() {
        let source = FailingSource(failures: failures)
        let recorder = LoadRecorder<Int>()

        recorder.load(source.loader.retry(.immediate(maxAttempts: .max), scheduler: .immediate))

        XCTAssertEqual(recorder.values, [failures + 1])
        XCTAssertEqual(source.attempts, failures + 1)
    }

    func test_loaderRetry_withZeroDelayOnAnImmediateScheduler_doesNotRecurseEither() {
        let source = FailingSource(failures: failures)
        let recorder = LoadRecorder<Int>()

        recorder.load(source.loader.retry(.constant(.zero, maxAttempts: .max), scheduler: .immediate))
        let delayed = FailingSource(failures: 100_000).loader
        recorder.load(delayed.retry(.constant(.nanoseconds(1), maxAttempts: .max), scheduler: .immediate))

        XCTAssertEqual(recorder.values, [failures + 1, 100_001])
    }

    func test_streamRetry_survivesAMillionSynchronousFailures_andDeliversTheSuccessAfterThem() {
        let source = FailingSource(failures: failures)
        let recorder = StreamRecorder(source.loader.asStream().retry(.max))

        XCTAssertEqual(recorder.values, [failures + 1])
        XCTAssertNotNil(recorder.completion)
        XCTAssertEqual(source.attempts, failures + 1)
    }

    func test_retryMax_doesNotTrap_andRetriesUntilSuccess() {
        let source = FailingSource(failures: 3)
        let forever = StreamRecorder(source.loader.asStream().retry(Int.max))
        let almostForever = StreamRecorder(FailingSource(failures: 3).loader.asStream().retry(Int.max - 1))

        XCTAssertEqual(forever.values, [4])
        XCTAssertEqual(almostForever.values, [4])
    }

    func test_policyWithUnlimitedAttempts_allowsRetryAfterAnyAttempt() {
        let policy = RetryPolicy.exponential(initial: .seconds(1), maxAttempts: RetryPolicy.unlimited)

        XCTAssertTrue(policy.allowsRetry(after: 1, error: anyError))
        XCTAssertTrue(policy.allowsRetry(after: Int.max - 1, error: anyError))
        XCTAssertTrue(policy.allowsRetry(after: Int.max, error: anyError))
        XCTAssertFalse(RetryPolicy.immediate(maxAttempts: 3).allowsRetry(after: 3, error: anyError))
    }

    func test_exponentialBackoff_staysWithinItsCap_forHugeRetryNumbersAndCaps() {
        let capped = Backoff.exponential(initial: .milliseconds(100), maxDelay: .seconds(30))
        XCTAssertEqual(capped.delay(beforeRetry: 1), .milliseconds(100))
        XCTAssertEqual(capped.delay(beforeRetry: 4), .milliseconds(800))
        XCTAssertEqual(capped.delay(beforeRetry: 1_000_000), .seconds(30))
        XCTAssertEqual(capped.delay(beforeRetry: .max), .seconds(30))

        let uncapped = Backoff.exponential(initial: .seconds(1), maxDelay: .seconds(Int64.max))
        XCTAssertGreaterThan(uncapped.delay(beforeRetry: .max), .seconds(1_000_000_000))
        XCTAssertEqual(Backoff.exponential(initial: .seconds(1), multiplier: 1).delay(beforeRetry: .max), .seconds(1))
    }

    func test_delay_honoursAnErrorsRetryAfter_withinTheMaximumDelay() {
        let policy = RetryPolicy.exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: 5)

        XCTAssertEqual(policy.delay(beforeRetry: 1, after: anyError), .seconds(1))
        XCTAssertEqual(policy.delay(beforeRetry: 1, after: AskedToWait(retryAfter: .seconds(10))), .seconds(10))
        XCTAssertEqual(policy.delay(beforeRetry: 1, after: AskedToWait(retryAfter: .seconds(1_000_000))), .seconds(30))
        XCTAssertEqual(policy.delay(beforeRetry: 3, after: AskedToWait(retryAfter: .milliseconds(1))), .seconds(4))
        XCTAssertEqual(policy.delay(beforeRetry: 1, after: AskedToWait(retryAfter: nil)), .seconds(1))
    }

    func test_loaderRetry_waitsAsLongAsTheErrorAsks() {
        let upstream = LoaderSpy<Int>()
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.retry(.constant(.seconds(1), maxAttempts: 2), scheduler: scheduler))

        upstream.fail(with: AskedToWait(retryAfter: .seconds(5)))

        XCTAssertEqual(scheduler.scheduledDelays, [.seconds(5)])
    }

    func test_streamRetry_startsTheCountOverAfterAHealthyAttempt_andBacksOffMoreAfterShortOnes() {
        let scheduler = TestScheduler()
        let subject = Locked<StreamObserver<Int, TestError>?>(nil)
        let policy = RetryPolicy.exponential(initial: .seconds(1), maxDelay: .seconds(60), maxAttempts: 4)
            .resettingAttempts(after: .seconds(10))
        let recorder = StreamRecorder(
            EventStream { observer in subject.withLock { $0 = observer } }.retry(policy, scheduler: scheduler))

        func failNow() { subject.withLock { $0 }?.fail(TestError(id: 1)) }
        failNow()  // short-lived attempt 1: wait 1 s
        scheduler.advance(by: .seconds(1))
        failNow()  // short-lived attempt 2: wait 2 s
        scheduler.advance(by: .seconds(2))
        scheduler.advance(by: .seconds(30))  // attempt 3 stays up for 30 s
        failNow()  // ...so it counts as a first failure again: wait 1 s
        scheduler.advance(by: .seconds(1))
        failNow()
        scheduler.advance(by: .seconds(2))
        failNow()
        scheduler.advance(by: .seconds(4))
        failNow()  // fourth short attempt in a row: the policy gives up

        XCTAssertEqual(scheduler.scheduledDelays, [.seconds(1), .seconds(2), .seconds(1), .seconds(2), .seconds(4)])
        XCTAssertEqual(recorder.completion, .failure(TestError(id: 1)))
    }
}

/// A loader that fails synchronously `failures` times, then succeeds with the attempt's number.
private final class FailingSource: Sendable {
    private let failures: Int
    private let count = Locked(0)

    init(failures: Int) {
        self.failures = failures
    }

    var attempts: Int { count.withLock { $0 } }

    var loader: AnyLoader<Int> {
        AnyLoader { [self] completion in
            let attempt = count.withLock { count -> Int in
                count += 1
                return count
            }
            completion(attempt > failures ? .success(attempt) : .failure(anyError))
            return AnyCancellationToken {}
        }
    }
}

private struct AskedToWait: RetryAfterError {
    let retryAfter: Duration?
}
