import Loading
import LoadingTestSupport
import XCTest

final class AsyncBridgeTests: XCTestCase {
    func test_load_returnsValue() async throws {
        let sut = AnyLoader<Int> { completion in
            DispatchQueue.global().async { completion(.success(3)) }
            return AnyCancellationToken {}
        }

        let value = try await sut.load()

        XCTAssertEqual(value, 3)
    }

    func test_load_throwsLoadError() async {
        let sut = AnyLoader<Int> { completion in
            completion(.failure(TestError(id: 8)))
            return AnyCancellationToken {}
        }

        do {
            _ = try await sut.load()
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error as? TestError, TestError(id: 8))
        }
    }

    func test_taskCancellation_cancelsLoadAndThrowsCancellationError() async {
        let upstream = LoaderSpy<Int>()
        let task = Task { try await upstream.load() }
        while upstream.loadCount == 0 { await Task.yield() }

        task.cancel()
        let result = await task.result
        upstream.complete(with: 1)

        XCTAssertTrue((try? result.get()) == nil)
        if case .failure(let error) = result { XCTAssertTrue(error is CancellationError, "\(error)") }
        XCTAssertEqual(upstream.cancelledRequests, [0])
    }

    func test_alreadyCancelledTask_throwsWithoutLeavingALoadRunning() async {
        let upstream = LoaderSpy<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await upstream.load()
        }

        let result = await task.result

        if case .failure(let error) = result { XCTAssertTrue(error is CancellationError) } else { XCTFail() }
        XCTAssertEqual(upstream.pendingRequests, [])
    }

    func test_aLoadAnsweredAtOnce_returnsItsValue_andItsTokenIsReleased() async throws {
        struct Weak: Sendable { weak var probe: LeakMarker? }
        let seen = Locked(Weak())
        let sut = AnyLoader<Int> { completion in
            let probe = LeakMarker()
            seen.withLock { $0.probe = probe }
            completion(.success(5))
            return AnyCancellationToken { probe.touch() }
        }

        let value = try await sut.load()

        XCTAssertEqual(value, 5)
        XCTAssertNil(seen.withLock { $0.probe }, "nothing of the load is kept once it answered")
    }

    func test_answersRacingCancellation_resumeTheCallerExactlyOnce() async {
        for round in 0..<500 {
            let sut = AnyLoader<Int> { completion in
                DispatchQueue.global().async { completion(.success(round)) }
                return AnyCancellationToken {}
            }
            let task = Task { try await sut.load() }
            if round.isMultiple(of: 2) { await Task.yield() }
            task.cancel()
            switch await task.result {
            case .success(let value): XCTAssertEqual(value, round)
            case .failure(let error): XCTAssertTrue(error is CancellationError, "\(error)")
            }
        }
    }
}
