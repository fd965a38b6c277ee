import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class AnyLoaderTests: XCTestCase {
    func test_wrapsLoaderAndForwardsLoadsAndCancels() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        let sut: any Loader<Int> = AnyLoader(upstream)

        let cancelled = recorder.load(sut.eraseToAnyLoader())
        recorder.load(sut.eraseToAnyLoader())
        cancelled.cancel()
        upstream.complete(with: 2, at: 1)

        XCTAssertEqual(upstream.cancelledRequests, [0])
        XCTAssertEqual(recorder.values, [2])
    }

    func test_callbackClosure_keepsTheContractEvenIfTheClosureDoesNot() {
        let sut = AnyLoader<Int> { completion in
            completion(.success(1))
            completion(.success(2))  // a misbehaving source
            return AnyCancellationToken {}
        }
        let recorder = LoadRecorder<Int>()

        recorder.load(sut)

        XCTAssertEqual(recorder.values, [1])
    }

    func test_callbackClosure_cancelReachesTheWorkAndDropsALateCompletion() {
        let stored = Locked<LoadCompletion<Int>?>(nil)
        let workCancelled = Locked(false)
        let sut = AnyLoader<Int> { completion in
            stored.withLock { $0 = completion }
            return AnyCancellationToken { workCancelled.withLock { $0 = true } }
        }
        let recorder = LoadRecorder<Int>()

        recorder.load(sut).cancel()
        stored.withLock { $0 }?(.success(1))

        XCTAssertTrue(workCancelled.withLock { $0 })
        XCTAssertEqual(recorder.count, 0)
    }

    func test_asyncClosure_deliversValueAndError() {
        let value = AnyLoader { 42 }
        let failure = AnyLoader<Int> { throw TestError(id: 5) }
        let recorder = LoadRecorder<Int>()
        let done = expectation(description: "both")
        done.expectedFulfillmentCount = 2

        value.load {
            recorder.record($0)
            done.fulfill()
        }
        failure.load {
            recorder.record($0)
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)

        XCTAssertEqual(recorder.values, [42])
        XCTAssertEqual(recorder.errors.compactMap { $0 as? TestError }, [TestError(id: 5)])
    }

    func test_asyncClosure_cancelCancelsTheTaskAndNeverCompletes() {
        let started = expectation(description: "started")
        let dropped = expectation(description: "the result the task returned after the cancel was dropped")
        let sut = AnyLoader<DeinitProbe> {
            started.fulfill()
            while !Task.isCancelled { await Task.yield() }
            return DeinitProbe { dropped.fulfill() }  // delivered, the recorder would keep it
        }
        let recorder = LoadRecorder<DeinitProbe>()

        let token = recorder.load(sut)
        wait(for: [started], timeout: .watchdog)
        token.cancel()
        wait(for: [dropped], timeout: .watchdog)

        XCTAssertEqual(recorder.count, 0)
    }
}
