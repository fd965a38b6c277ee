import Loading
import LoadingTestSupport
import XCTest

final class FallbackTests: XCTestCase {
    func test_load_deliversPrimaryValueAndNeverTouchesFallbackOnSuccess() {
        let (sut, primary, fallback) = makeSUT()
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        primary.complete(with: "primary")

        XCTAssertEqual(recorder.values, ["primary"])
        XCTAssertEqual(fallback.loadCount, 0)
    }

    func test_load_doesNotStartFallbackBeforePrimaryFails() {
        let (sut, primary, fallback) = makeSUT()
        let token = LoadRecorder<String>().load(sut)

        XCTAssertEqual(primary.loadCount, 1)
        XCTAssertEqual(fallback.loadCount, 0)
        token.cancel()
    }

    func test_load_deliversFallbackValueOnPrimaryFailure() {
        let (sut, primary, fallback) = makeSUT()
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        primary.fail(with: anyError)
        XCTAssertEqual(recorder.count, 0)
        fallback.complete(with: "fallback")

        XCTAssertEqual(recorder.values, ["fallback"])
    }

    func test_load_deliversFallbackErrorWhenBothFail() {
        let (sut, primary, fallback) = makeSUT()
        let recorder = LoadRecorder<String>()
        recorder.load(sut)

        primary.fail(with: TestError(id: 1))
        fallback.fail(with: TestError(id: 2))

        XCTAssertEqual(recorder.count, 1)
        assertError(recorder.all.first, TestError(id: 2))
    }

    func test_chain_triesSourcesInOrderAndStopsAtFirstSuccess() {
        let first = LoaderSpy<String>()
        let second = LoaderSpy<String>()
        let third = LoaderSpy<String>()
        let recorder = LoadRecorder<String>()
        recorder.load(first.fallback(to: second).fallback(to: third))

        first.fail(with: anyError)
        XCTAssertEqual([second.loadCount, third.loadCount], [1, 0])
        second.fail(with: anyError)
        XCTAssertEqual(third.loadCount, 1)
        third.complete(with: "third")

        XCTAssertEqual(recorder.values, ["third"])
    }

    func test_cancelBeforePrimaryCompletes_cancelsPrimaryAndNeverStartsFallback() {
        let (sut, primary, fallback) = makeSUT()
        let recorder = LoadRecorder<String>()
        let token = recorder.load(sut)

        token.cancel()
        primary.fail(with: anyError)

        XCTAssertEqual(primary.cancelledRequests, [0])
        XCTAssertEqual(fallback.loadCount, 0)
        XCTAssertEqual(recorder.count, 0)
    }

    func test_cancelDuringFallback_cancelsFallbackAndNeverCompletes() {
        let (sut, primary, fallback) = makeSUT()
        let recorder = LoadRecorder<String>()
        let token = recorder.load(sut)

        primary.fail(with: anyError)
        token.cancel()
        fallback.complete(with: "late")

        XCTAssertEqual(fallback.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }

    func test_cancel_reachesFallbackStartedSynchronouslyByAFailingPrimary() {
        let fallback = LoaderSpy<String>()
        let failing = AnyLoader<String> { completion in
            completion(.failure(anyError))
            return AnyCancellationToken {}
        }
        let recorder = LoadRecorder<String>()
        let token = recorder.load(failing.fallback(to: fallback))

        token.cancel()

        XCTAssertEqual(fallback.cancelledRequests, [0])
        XCTAssertEqual(recorder.count, 0)
    }

    func test_cancelAfterCompletion_doesNothing() {
        let (sut, primary, _) = makeSUT()
        let recorder = LoadRecorder<String>()
        let token = recorder.load(sut)

        primary.complete(with: "value")
        token.cancel()

        XCTAssertEqual(recorder.values, ["value"])
        XCTAssertEqual(primary.cancelledRequests, [])
    }

    func test_token_isReleasedAfterCompletionAndAfterCancel() {
        let (sut, primary, fallback) = makeSUT()
        sut.load(completion: completionTrackedForLeaks())
        primary.fail(with: anyError)
        fallback.complete(with: "value")

        let cancelled = sut.load(completion: completionTrackedForLeaks())
        cancelled.cancel()
    }

    private func makeSUT(
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> (FallbackLoader<LoaderSpy<String>, LoaderSpy<String>>, LoaderSpy<String>, LoaderSpy<String>) {
        let primary = LoaderSpy<String>()
        let fallback = LoaderSpy<String>()
        trackForMemoryLeaks(primary, file: file, line: line)
        trackForMemoryLeaks(fallback, file: file, line: line)
        return (primary.fallback(to: fallback), primary, fallback)
    }
}
