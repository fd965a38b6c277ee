import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class ConcurrencyStressTests: XCTestCase {
    /// 10,000 loads started from 8 threads through memory, else database (cached to memory), else a retried
    /// network (cached to both): each completes exactly once.
    func test_tenThousandLoadsFromEightThreads_eachCompleteExactlyOnce() {
        let loads = 10_000
        let threads = 8
        let memory = FlakyStore(failEvery: 3)
        let database = FlakyStore(failEvery: 2)
        let network = AnyLoader<Int> { completion in
            DispatchQueue.global().async { completion(.success(1)) }
            return AnyCancellationToken {}
        }
        let sut =
            memory
            .fallback(to: database.caching(to: memory))
            .fallback(
                to: network.retry(.immediate(maxAttempts: 2), scheduler: .immediate).caching(to: database).caching(
                    to: memory)
            )
            .map { $0 + 1 }

        let counts = Locked([Int](repeating: 0, count: loads))
        let group = DispatchGroup()
        for _ in 0..<loads { group.enter() }
        let startedThreads = (0..<threads).map { thread in
            Thread {
                for index in stride(from: thread, to: loads, by: threads) {
                    sut.load { result in
                        XCTAssertEqual(try? result.get(), 2)
                        counts.withLock { $0[index] += 1 }
                        group.leave()
                    }
                }
            }
        }
        for element in startedThreads { element.start() }

        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success, "not every load completed")
        XCTAssertEqual(counts.withLock { $0 }.filter { $0 != 1 }.count, 0, "some load completed more or less than once")
    }

    /// Loads cancelled from another thread while their sources complete: each completes at most once, and a
    /// load whose cancel returned before its source completed never completes.
    func test_cancelRacingCompletion_completesAtMostOnceAndNeverAfterAWinningCancel() {
        let iterations = 2_000
        let completions = Locked([Int](repeating: 0, count: iterations))
        let lateCompletions = Locked(0)
        let group = DispatchGroup()
        for iteration in 0..<iterations {
            let upstream = LoaderSpy<Int>()
            let cancelReturned = Locked(false)
            let token = upstream.fallback(to: upstream).retry(.immediate(maxAttempts: 2), scheduler: .immediate)
                .load { _ in completions.withLock { $0[iteration] += 1 } }
            group.enter()
            DispatchQueue.global().async {
                upstream.fail(with: anyError, at: 0)
                // A source completing after the cancel returned: must be dropped.
                let isLate = cancelReturned.withLock { $0 }
                let before = completions.withLock { $0[iteration] }
                upstream.complete(with: 1)
                if isLate && completions.withLock({ $0[iteration] }) != before { lateCompletions.withLock { $0 += 1 } }
                group.leave()
            }
            token.cancel()
            cancelReturned.withLock { $0 = true }
        }
        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success)
        XCTAssertEqual(completions.withLock { $0 }.filter { $0 > 1 }.count, 0, "a load completed twice")
        XCTAssertEqual(lateCompletions.withLock { $0 }, 0, "a load completed after its cancel returned")
    }
}

/// A thread-safe store that fails every `failEvery`-th load, to send loads down every branch of a composition.
private final class FlakyStore: Loader, Cache {
    private let state = Locked((value: Int?.none, loads: 0))
    private let failEvery: Int

    init(failEvery: Int) {
        self.failEvery = failEvery
    }

    func load(completion: @escaping LoadCompletion<Int>) -> any CancellationToken {
        let value = state.withLock { state -> Int? in
            state.loads += 1
            return state.loads.isMultiple(of: failEvery) ? nil : state.value
        }
        completion(value.map { .success($0) } ?? .failure(anyError))
        return AnyCancellationToken {}
    }

    func save(_ value: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        state.withLock { $0.value = value }
        completion(.success(()))
    }
}
