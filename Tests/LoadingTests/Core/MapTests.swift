import Loading
import LoadingTestSupport
import XCTest

final class MapTests: XCTestCase {
    func test_map_transformsValue() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.map { "#\($0)" })

        upstream.complete(with: 7)

        XCTAssertEqual(recorder.values, ["#7"])
    }

    func test_map_passesFailureThroughWithoutCallingTransform() {
        let upstream = LoaderSpy<Int>()
        let calls = LoadRecorder<Int>()
        let recorder = LoadRecorder<Int>()
        recorder.load(
            upstream.map {
                calls.record(.success($0))
                return $0
            })

        upstream.fail(with: TestError(id: 4))

        XCTAssertEqual(calls.count, 0)
        assertError(recorder.all.first, TestError(id: 4))
    }

    func test_mapError_transformsErrorAndLeavesValuesAlone() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        let sut = upstream.mapError { TestError(id: (($0 as? TestError)?.id ?? 0) + 100) }
        recorder.load(sut)
        recorder.load(sut)

        upstream.fail(with: TestError(id: 1), at: 0)
        upstream.complete(with: 5, at: 1)

        assertError(recorder.all.first, TestError(id: 101))
        XCTAssertEqual(recorder.values, [5])
    }

    func test_cancel_cancelsUpstreamAndNeverCompletes() {
        let upstream = LoaderSpy<Int>()
        let recorder = LoadRecorder<Int>()
        let token = recorder.load(upstream.map { $0 + 1 }.mapError { $0 })

        token.cancel()
        upstream.complete(with: 1)

        XCTAssertEqual(upstream.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }
}
