import Loading
import LoadingScreens
import LoadingTestSupport
import XCTest

final class SectionedSourceTests: XCTestCase {
    func test_sectionsLoadIndependently_slowAndFailingSourcesBlockNobody() {
        let fast = LoaderSpy<[Int]>()
        let slow = LoaderSpy<[Int]>()
        let failing = LoaderSpy<[Int]>()
        let sut = SectionedSource([
            TitledSource(title: "Fast", loader: fast),
            TitledSource(title: "Slow", loader: slow),
            TitledSource(title: "Failing", loader: failing),
        ])
        let recorder = StreamRecorder(sut.sections)

        XCTAssertEqual(
            recorder.values.last?.map(\.state),
            [.loading(previous: nil), .loading(previous: nil), .loading(previous: nil)])
        fast.complete(with: [1])
        failing.fail(with: TestError(id: 3))
        XCTAssertEqual(
            recorder.values.last,
            [
                SectionState(title: "Fast", state: .loaded([1])),
                SectionState(title: "Slow", state: .loading(previous: nil)),
                SectionState(title: "Failing", state: .failed(TestError(id: 3), previous: nil)),
            ])
        XCTAssertNil(recorder.completion)
        slow.complete(with: [2])

        XCTAssertEqual(recorder.values.last?.map(\.state)[1], .loaded([2]))
        XCTAssertEqual(recorder.completion, .finished)
    }

    func test_streamSection_updatesAndKeepsItsValueAfterAFailure() {
        let live = StreamSubject<[Int], any Error>()
        let sut = SectionedSource([TitledSource(title: "Live", values: live.stream)])
        let recorder = StreamRecorder(sut.sections)
        live.send([1])
        live.send([1, 2])
        live.send(completion: .failure(TestError(id: 5)))

        XCTAssertEqual(
            recorder.values.map { $0[0].state },
            [.loading(previous: nil), .loaded([1]), .loaded([1, 2]), .failed(TestError(id: 5), previous: [1, 2])])
    }

    func test_cancellingCancelsEverySource() {
        let first = LoaderSpy<[Int]>()
        let second = LoaderSpy<[Int]>()
        let recorder = StreamRecorder(
            SectionedSource([TitledSource(title: "A", loader: first), TitledSource(title: "B", loader: second)])
                .sections)
        recorder.cancel()
        XCTAssertEqual(first.cancelledRequests + second.cancelledRequests, [0, 0])
    }
}
