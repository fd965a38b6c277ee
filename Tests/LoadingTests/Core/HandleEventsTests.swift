import Loading
import LoadingTestSupport
import XCTest

final class HandleEventsTests: XCTestCase {
    func test_reportsStartThenValueBeforeTheCompletionSeesIt() {
        let upstream = LoaderSpy<Int>()
        let log = Locked<[String]>([])
        let sut = upstream.handleEvents(
            onStart: { log.withLock { $0.append("start") } },
            onValue: { value in log.withLock { $0.append("value \(value)") } },
            onFailure: { _ in log.withLock { $0.append("failure") } },
            onCancel: { log.withLock { $0.append("cancel") } })

        sut.load { _ in log.withLock { $0.append("completion") } }
        XCTAssertEqual(log.withLock { $0 }, ["start"])
        upstream.complete(with: 1)

        XCTAssertEqual(log.withLock { $0 }, ["start", "value 1", "completion"])
    }

    func test_reportsFailureBeforeTheCompletionSeesIt() {
        let upstream = LoaderSpy<Int>()
        let log = Locked<[String]>([])
        let sut = upstream.handleEvents(onFailure: { _ in log.withLock { $0.append("failure") } })

        sut.load { _ in log.withLock { $0.append("completion") } }
        upstream.fail(with: anyError)

        XCTAssertEqual(log.withLock { $0 }, ["failure", "completion"])
    }

    func test_reportsCancelOnlyForAPendingLoad() {
        let upstream = LoaderSpy<Int>()
        let cancels = Locked(0)
        let recorder = LoadRecorder<Int>()
        let sut = upstream.handleEvents(onCancel: { cancels.withLock { $0 += 1 } })

        let pending = recorder.load(sut)
        pending.cancel()
        pending.cancel()
        let completed = recorder.load(sut)
        upstream.complete(with: 1, at: 1)
        completed.cancel()
        upstream.complete(with: 0, at: 0)

        XCTAssertEqual(cancels.withLock { $0 }, 1)
        XCTAssertEqual(upstream.cancelledRequests, [0])
        XCTAssertEqual(recorder.values, [1])
    }

    func test_onFailure_logsErrorAndDeliversItUnchanged() {
        let upstream = LoaderSpy<Int>()
        let logged = LoadRecorder<Int>()
        let recorder = LoadRecorder<Int>()
        recorder.load(upstream.handleEvents(onFailure: { logged.record(.failure($0)) }))

        upstream.fail(with: TestError(id: 42))

        assertError(logged.all.first, TestError(id: 42))
        assertError(recorder.all.first, TestError(id: 42))
    }
}
