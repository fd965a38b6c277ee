import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class ResourceRepositoryTests: XCTestCase {
    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_tryAwaitLoad_awaitsTheValue_notTheFireAndForgetLoad() async throws {
        let store = Store<String, [String]>(
            levels: [],
            fetch: LoaderFamily { _ in
                AnyLoader<[String]> { completion in
                    completion(.success(["Ada"]))
                    return AnyCancellationToken()
                }
            })
        let repository = ResourceRepository(store: store, key: "friends", scheduler: .immediate)

        let friends = try await repository.load()  // the Loader's async load: a value, not ()

        XCTAssertEqual(friends, ["Ada"])
    }

    typealias State = LoadingState<[Int]>

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_publishesIdleThenLoadingThenLoaded_toEveryObserver() {
        let (sut, loader) = makeSUT()
        let first = StreamRecorder(sut.state)
        sut.load()
        let second = StreamRecorder(sut.state)
        loader.complete(with: [1])

        XCTAssertEqual(first.values, [.idle, .loading(previous: nil), .loaded([1])])
        XCTAssertEqual(second.values, [.loading(previous: nil), .loaded([1])])
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_failedLoad_publishesFailure_andFailedRefreshKeepsTheValue() {
        let (sut, loader) = makeSUT()
        let recorder = StreamRecorder(sut.state)
        sut.load()
        loader.fail(with: TestError(id: 1))
        sut.load()
        loader.complete(with: [1])
        sut.refresh()
        loader.fail(with: TestError(id: 2))

        XCTAssertEqual(
            recorder.values,
            [
                .idle, .loading(previous: nil), .failed(TestError(id: 1), previous: nil),
                .loading(previous: nil), .loaded([1]),
                .loading(previous: [1]), .failed(TestError(id: 2), previous: [1]),
            ])
        XCTAssertEqual(loader.loadCount, 3)
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_refresh_isNeverAbsorbedByALoadInFlight() {
        let (sut, loader) = makeSUT()
        let recorder = StreamRecorder(sut.state)
        sut.load()
        sut.refresh()

        XCTAssertEqual(loader.loadCount, 2, "the refresh fetches anew while the load runs")
        loader.complete(with: [1], at: 0)
        XCTAssertEqual(recorder.values.last, .loading(previous: [1]), "loading until the refresh is done too")
        loader.complete(with: [2], at: 1)
        XCTAssertEqual(recorder.values.last, .loaded([2]))
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_refreshCompletion_receivesThatRefreshsResult_andAWipeFailsIt() {
        let (sut, loader) = makeSUT()
        let results = LoadRecorder<[Int]>()
        sut.refresh(completion: results.record)
        loader.complete(with: [1])
        sut.refresh(completion: results.record)
        sut.wipe()
        loader.complete(with: [2])

        XCTAssertEqual(results.count, 2)
        XCTAssertEqual(try? results.all.first?.get(), [1])
        assertError(results.all.last, ResourceRepository<[Int]>.WipedError())
        XCTAssertEqual(sut.currentState, .idle)
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_storeBacked_showsEveryChangeOfTheKey_whoeverMadeIt() {
        let network = KeyedLoaderSpy<String, [Int]>()
        let store = Store<String, [Int]>(levels: [], fetch: LoaderFamily { network[$0] })
        let sut = ResourceRepository(store: store, key: "a", scheduler: .immediate)
        let recorder = StreamRecorder(sut.state)

        store.write([1], for: "a")
        sut.load()
        store.write([2], for: "b")
        store.update("a") { $0.map { $0 + [3] } }
        store.remove("a")

        XCTAssertEqual(
            recorder.values, [.idle, .loaded([1]), .loading(previous: [1]), .loaded([1]), .loaded([1, 3]), .idle])
        XCTAssertEqual(network.loadCount(for: "a"), 0, "cache first: the store's value is enough")
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_optimisticEdit_throughTheStore_undoesOnlyWhatFailed() {
        let network = KeyedLoaderSpy<String, [Int]>()
        let store = Store<String, [Int]>(levels: [], fetch: LoaderFamily { network[$0] })
        let sut = ResourceRepository(store: store, key: "a", scheduler: .immediate)
        store.write([1, 2, 3], for: "a")
        let first = LoaderSpy<Void>()
        let second = LoaderSpy<Void>()

        sut.mutate({ $0?.filter { $0 != 1 } }, commit: first)
        sut.mutate({ $0?.filter { $0 != 2 } }, commit: second)
        XCTAssertEqual(sut.currentState, .loaded([3]))
        first.fail(with: TestError(id: 1))
        second.complete(with: ())

        XCTAssertEqual(sut.currentState, .loaded([1, 3]))
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_concurrentLoads_coalesceIntoOneUnderlyingLoad() {
        let (sut, loader) = makeSUT()
        let completions = Locked(0)
        let group = DispatchGroup()
        let callers = 1_000
        for _ in 0..<callers { group.enter() }
        DispatchQueue.concurrentPerform(iterations: callers) { _ in
            sut.load { result in
                XCTAssertEqual(try? result.get(), [7])
                completions.withLock { $0 += 1 }
                group.leave()
            }
        }
        XCTAssertEqual(loader.loadCount, 1)
        loader.complete(with: [7])

        XCTAssertEqual(group.wait(timeout: .now() + .watchdog), .success)
        XCTAssertEqual(completions.withLock { $0 }, callers)
        XCTAssertEqual(sut.currentState, .loaded([7]))
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_cancelledCaller_isDroppedWhileTheSharedLoadGoesOn() {
        let (sut, loader) = makeSUT()
        let results = LoadRecorder<[Int]>()
        let cancelled = results.load(sut)
        results.load(sut)
        cancelled.cancel()
        loader.complete(with: [1])

        XCTAssertEqual(results.values, [[1]])
        XCTAssertEqual(loader.cancelledRequests, [])
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_wipeDuringAnInFlightLoad_publishesIdleAndNothingAfterwards() {
        let (sut, loader) = makeSUT()
        let recorder = StreamRecorder(sut.state)
        let results = LoadRecorder<[Int]>()
        results.load(sut)

        sut.wipe()
        loader.complete(with: [1])

        XCTAssertEqual(recorder.values, [.idle, .loading(previous: nil), .idle])
        XCTAssertEqual(loader.cancelledRequests, [0])
        assertError(results.all.first, ResourceRepository<[Int]>.WipedError())
        sut.load()
        loader.complete(with: [2])
        XCTAssertEqual(recorder.values.last, .loaded([2]), "the repository works again after a wipe")
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_optimisticEditDuringAnInFlightLoad_staysAppliedOverTheLoadedValue() {
        let (sut, loader) = makeSUT()
        let results = LoadRecorder<[Int]>()
        results.load(sut)
        sut.mutate({ ($0 ?? []) + [9] }, commit: LoaderSpy<Void>())
        loader.complete(with: [1])

        XCTAssertEqual(sut.currentState, .loaded([1, 9]))
        XCTAssertEqual(results.values, [[1, 9]], "callers get the value shown")
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_deliversStateOnTheGivenScheduler() {
        let scheduler = TestScheduler()
        let loader = LoaderSpy<[Int]>()
        let sut = ResourceRepository(loader: loader, scheduler: scheduler)
        let recorder = StreamRecorder(sut.state)
        sut.load()
        XCTAssertEqual(recorder.values, [])
        scheduler.advance()
        XCTAssertEqual(recorder.values, [.idle, .loading(previous: nil)])
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    func test_deliversOnMainByDefault() {
        let loader = LoaderSpy<[Int]>()
        let sut = ResourceRepository(loader: loader)
        let loaded = expectation(description: "loaded on main")
        let subscription = sut.state.sink { state in
            if state == .loaded([1]) {
                XCTAssertTrue(Thread.isMainThread)
                loaded.fulfill()
            }
        }
        sut.load()
        DispatchQueue.global().async { loader.complete(with: [1]) }
        wait(for: [loaded], timeout: .watchdog)
        subscription.cancel()
    }

    @available(*, deprecated, message: "exercises the deprecated ResourceRepository on purpose")
    private func makeSUT() -> (ResourceRepository<[Int]>, LoaderSpy<[Int]>) {
        let loader = LoaderSpy<[Int]>()
        let sut = ResourceRepository(loader: loader, scheduler: .immediate)
        return (sut, loader)
    }
}
