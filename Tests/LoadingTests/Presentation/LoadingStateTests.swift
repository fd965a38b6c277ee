import Loading
import LoadingScreens
import XCTest

final class LoadingStateTests: XCTestCase {
    typealias State = LoadingState<[Int]>

    func test_everyTransition() {
        let idle = State.idle
        XCTAssertEqual(idle.startingLoad(), .loading(previous: nil))
        XCTAssertEqual(State.loading(previous: nil).finishingLoad(with: .success([1])), .loaded([1]))
        XCTAssertEqual(
            State.loading(previous: nil).finishingLoad(with: .failure(TestError(id: 1))),
            .failed(TestError(id: 1), previous: nil))
        XCTAssertEqual(State.loaded([1]).startingLoad(), .loading(previous: [1]), "refreshing keeps the value")
        XCTAssertEqual(State.loading(previous: [1]).finishingLoad(with: .success([2])), .loaded([2]))
        XCTAssertEqual(
            State.loading(previous: [1]).finishingLoad(with: .failure(TestError(id: 2))),
            .failed(TestError(id: 2), previous: [1]), "a failed refresh keeps the value")
        XCTAssertEqual(State.failed(TestError(id: 2), previous: [1]).startingLoad(), .loading(previous: [1]))
        XCTAssertEqual(State.failed(TestError(id: 2), previous: nil).startingLoad(), .loading(previous: nil))
    }

    func test_accessors() {
        XCTAssertNil(State.idle.value)
        XCTAssertEqual(State.loading(previous: [1]).value, [1])
        XCTAssertEqual(State.loaded([2]).value, [2])
        XCTAssertEqual(State.failed(TestError(), previous: [3]).value, [3])
        XCTAssertTrue(State.loading(previous: nil).isLoading)
        XCTAssertFalse(State.loaded([]).isLoading)
        XCTAssertEqual(State.failed(TestError(id: 4), previous: nil).error as? TestError, TestError(id: 4))
        XCTAssertNil(State.loaded([]).error)
    }

    func test_equality_comparesCasesValuesAndErrors() {
        XCTAssertNotEqual(State.loaded([1]), .loaded([2]))
        XCTAssertNotEqual(State.loading(previous: nil), .idle)
        XCTAssertNotEqual(State.failed(TestError(id: 1), previous: nil), .failed(TestError(id: 2), previous: nil))
        XCTAssertEqual(State.failed(TestError(id: 1), previous: [1]), .failed(TestError(id: 1), previous: [1]))
    }
}
