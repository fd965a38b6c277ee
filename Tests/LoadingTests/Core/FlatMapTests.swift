import Loading
import LoadingTestSupport
import XCTest

final class FlatMapTests: XCTestCase {
    func test_load_loadsTheSecondLoaderMadeFromTheFirstValue() {
        let session = LoaderSpy<String>()
        let api = KeyedLoaderSpy<String, Int>()
        let recorder = LoadRecorder<Int>()

        recorder.load(session.flatMap { token in api[token] })
        session.complete(with: "token-1")
        XCTAssertEqual(api.loadCount(for: "token-1"), 1)
        api.complete("token-1", with: 42)

        XCTAssertEqual(recorder.values, [42])
    }

    func test_load_deliversTheFirstErrorWithoutCallingTransform() {
        let session = LoaderSpy<String>()
        let recorder = LoadRecorder<Int>()
        let called = Locked(false)

        recorder.load(
            session.flatMap { _ -> LoaderSpy<Int> in
                called.withLock { $0 = true }
                return LoaderSpy<Int>()
            })
        session.fail(with: TestError(id: 1))

        assertError(recorder.all.first, TestError(id: 1))
        XCTAssertFalse(called.withLock { $0 })
    }

    func test_load_deliversTheSecondError() {
        let session = LoaderSpy<String>()
        let api = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        recorder.load(session.flatMap { _ in api })
        session.complete(with: "t")
        api.fail(with: TestError(id: 2))

        assertError(recorder.all.first, TestError(id: 2))
    }

    func test_cancel_reachesWhicheverStepIsInFlight_andTheSecondNeverStartsAfterIt() {
        let session = LoaderSpy<String>()
        let api = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()

        recorder.load(session.flatMap { _ in api }).cancel()
        session.complete(with: "late")
        XCTAssertEqual(session.cancelledRequests, [0])
        XCTAssertEqual(api.loadCount, 0)

        let token = recorder.load(session.flatMap { _ in api })
        session.complete(with: "t")
        token.cancel()
        api.complete(with: 1)

        XCTAssertEqual(api.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }

    func test_synchronousSteps_completeOnce() {
        let first = AnyLoader<Int> { completion in
            completion(.success(2))
            return AnyCancellationToken {}
        }
        let recorder = LoadRecorder<Int>()

        recorder.load(first.flatMap { value in first.map { $0 * value } })

        XCTAssertEqual(recorder.values, [4])
    }
}
