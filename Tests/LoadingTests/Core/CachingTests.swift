import Loading
import LoadingTestSupport
import XCTest

final class CachingTests: XCTestCase {
    func test_load_savesValueAndDeliversIt() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>()
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache))

        upstream.complete(with: "value")

        XCTAssertEqual(cache.savedValues, ["value"])
        XCTAssertEqual(recorder.values, ["value"])
    }

    func test_load_neverCachesFailure() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>()
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache))

        upstream.fail(with: TestError(id: 7))

        XCTAssertEqual(cache.savedValues, [])
        assertError(recorder.all.first, TestError(id: 7))
    }

    func test_ignorePolicy_deliversValueWhenSaveFails() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: .failure(anyError))
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache))

        upstream.complete(with: "value")

        XCTAssertEqual(recorder.values, ["value"])
    }

    func test_ignorePolicy_deliversWithoutWaitingForTheSave() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache))

        upstream.complete(with: "value")

        XCTAssertEqual(recorder.values, ["value"])
        XCTAssertEqual(cache.savedValues, ["value"])
    }

    func test_reportPolicy_passesSaveErrorToHandlerAndDeliversValue() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let reported = LoadRecorder<Void>()
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache, policy: .reportFailures { reported.record(.failure($0)) }))

        upstream.complete(with: "value")
        XCTAssertEqual(recorder.values, ["value"])
        XCTAssertEqual(reported.count, 0)
        cache.completeSave(with: .failure(TestError(id: 3)))

        assertError(reported.all.first, TestError(id: 3))
    }

    func test_reportPolicy_reportsNothingWhenSaveSucceeds() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>()
        let reported = LoadRecorder<Void>()
        LoadRecorder<String>().load(
            upstream.caching(to: cache, policy: .reportFailures { reported.record(.failure($0)) }))

        upstream.complete(with: "value")

        XCTAssertEqual(reported.count, 0)
    }

    func test_failPolicy_waitsForSaveThenDeliversValue() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache, policy: .failLoad))

        upstream.complete(with: "value")
        XCTAssertEqual(recorder.count, 0)
        cache.completeSave(with: .success(()))

        XCTAssertEqual(recorder.values, ["value"])
    }

    func test_failPolicy_deliversSaveError() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let recorder = LoadRecorder<String>()
        recorder.load(upstream.caching(to: cache, policy: .failLoad))

        upstream.complete(with: "value")
        cache.completeSave(with: .failure(TestError(id: 9)))

        assertError(recorder.all.first, TestError(id: 9))
    }

    func test_cancelBeforeUpstreamCompletes_cancelsUpstreamAndSavesNothing() {
        for policy in [CacheSavePolicy.ignoreFailures, .failLoad, .reportFailures { _ in }] {
            let upstream = LoaderSpy<String>()
            let cache = CacheSpy<String>()
            let recorder = LoadRecorder<String>()
            let token = recorder.load(upstream.caching(to: cache, policy: policy))

            token.cancel()
            upstream.complete(with: "late")

            XCTAssertEqual(upstream.cancelledRequests, [0])
            XCTAssertEqual(cache.savedValues, [])
            XCTAssertEqual(recorder.count, 0)
        }
    }

    func test_failPolicy_cancelDuringSave_neverCompletes() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let recorder = LoadRecorder<String>()
        let token = recorder.load(upstream.caching(to: cache, policy: .failLoad))

        upstream.complete(with: "value")
        token.cancel()
        cache.completeSave(with: .success(()))

        XCTAssertEqual(recorder.count, 0)
    }

    func test_token_isReleasedAfterCompletionAndCancel() {
        let upstream = LoaderSpy<String>()
        let cache = CacheSpy<String>(completingWith: nil)
        let sut = upstream.caching(to: cache, policy: .failLoad)
        sut.load(completion: completionTrackedForLeaks())
        upstream.complete(with: "value")
        cache.completeSave(with: .success(()))

        let cancelled = sut.load(completion: completionTrackedForLeaks())
        cancelled.cancel()
        trackForMemoryLeaks(upstream)
        trackForMemoryLeaks(cache)
    }
}
