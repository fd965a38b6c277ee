import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

private enum RequestID {
    @TaskLocal static var current: String?
}

/// The scheduler on Swift concurrency keeps the task-local values of the code that started a load, through retry
/// delays and timeouts (a Dispatch timer loses them).
final class TaskSchedulerTests: XCTestCase {
    func test_retry_keepsTaskLocalValuesInEveryAttempt() async throws {
        let seen = Locked<[String?]>([])
        let flaky = AnyLoader<Int> {
            let attempt = seen.withLock { seen -> Int in
                seen.append(RequestID.current)
                return seen.count
            }
            if attempt < 3 { throw TestError(id: attempt) }
            return attempt
        }
        let sut = flaky.retry(.constant(.milliseconds(5), maxAttempts: 3))

        let value = try await RequestID.$current.withValue("req-1") { try await sut.load() }

        XCTAssertEqual(value, 3)
        XCTAssertEqual(seen.withLock { $0 }, ["req-1", "req-1", "req-1"])
    }

    func test_timeoutThenRetry_keepsTaskLocalValuesInTheAttemptAfterTheTimeout() async throws {
        let seen = Locked<[String?]>([])
        let hangsOnce = AnyLoader<Int> {
            let attempt = seen.withLock { seen -> Int in
                seen.append(RequestID.current)
                return seen.count
            }
            if attempt == 1 {  // hangs until the timeout cancels it
                let (never, continuation) = AsyncStream<Never>.makeStream()
                for await _ in never {}
                continuation.finish()
                try Task.checkCancellation()
            }
            return attempt
        }
        let sut = hangsOnce.timeout(after: .milliseconds(50))
            .retry(.immediate(maxAttempts: 2).retrying { $0 is TimeoutError })

        let value = try await RequestID.$current.withValue("req-2") { try await sut.load() }

        XCTAssertEqual(value, 2)
        XCTAssertEqual(seen.withLock { $0 }, ["req-2", "req-2"])
    }

    func test_dispatchScheduler_losesTaskLocalValues_whichIsWhyTheTaskSchedulerIsTheDefault() async throws {
        let seen = Locked<[String?]>([])
        let flaky = AnyLoader<Int> {
            let attempt = seen.withLock { seen -> Int in
                seen.append(RequestID.current)
                return seen.count
            }
            if attempt < 2 { throw TestError(id: attempt) }
            return attempt
        }
        let sut = flaky.retry(.constant(.milliseconds(5), maxAttempts: 2), scheduler: .global())

        _ = try await RequestID.$current.withValue("req-3") { try await sut.load() }

        XCTAssertEqual(seen.withLock { $0 }, ["req-3", nil])
    }

    func test_scheduleAfter_runsOnceAfterTheDelay_andNeverOnceCancelled() async {
        let scheduler = TaskScheduler()
        let ran = expectation(description: "runs")
        let start = scheduler.now
        let elapsed = Locked<Duration?>(nil)
        scheduler.schedule(after: .milliseconds(20)) {
            elapsed.withLock { $0 = scheduler.now - start }
            ran.fulfill()
        }
        let cancelled = Locked(false)
        let token = scheduler.schedule(after: .milliseconds(10)) { cancelled.withLock { $0 = true } }
        token.cancel()

        // The real clock is under test: an action due well after the cancelled one says when it would have run.
        let later = expectation(description: "an action due after the cancelled one ran")
        scheduler.schedule(after: .milliseconds(40)) { later.fulfill() }

        await fulfillment(of: [ran, later], timeout: .watchdog)
        XCTAssertGreaterThanOrEqual(elapsed.withLock { $0 } ?? .zero, .milliseconds(20))
        XCTAssertFalse(cancelled.withLock { $0 })
    }
}
