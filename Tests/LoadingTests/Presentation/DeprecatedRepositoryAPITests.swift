import Loading
import LoadingTestSupport
import XCTest

/// Code written against the API before the store keeps compiling (with deprecation warnings) and keeps its
/// behaviour. The methods are deprecated themselves, so that calling the old API here warns nobody.
final class DeprecatedRepositoryAPITests: XCTestCase {
    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_aRepositoryWithARefreshLoader_loadsWithTheLoader_andRefreshReachesTheRefreshLoader() {
        let cached = LoaderSpy<String>()
        let network = LoaderSpy<String>()
        let repository = ResourceRepository(loader: cached, refreshLoader: network, scheduler: ImmediateScheduler())

        repository.load()
        cached.complete(with: "cached")
        XCTAssertEqual(repository.currentState, .loaded("cached"))

        repository.refresh()
        XCTAssertEqual(network.loadCount, 1, "pull-to-refresh reaches the refresh loader")
        XCTAssertEqual(cached.loadCount, 1)
        network.complete(with: "fresh")
        XCTAssertEqual(repository.currentState, .loaded("fresh"))
    }

    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_aRepositoryWithoutARefreshLoader_refreshesWithTheLoader() {
        let loader = LoaderSpy<String>()
        let repository = ResourceRepository(loader: loader, refreshLoader: LoaderSpy<String>?.none)

        repository.refresh()
        loader.complete(with: "fresh")

        XCTAssertEqual(loader.loadCount, 1)
        XCTAssertEqual(repository.currentState, .loaded("fresh"))
    }

    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_publish_showsTheValueAtOnce_andALoadInFlightDoesNotReplaceIt() {
        let loader = LoaderSpy<String>()
        let repository = ResourceRepository(loader: loader, scheduler: ImmediateScheduler())
        repository.load()

        repository.publish("optimistic")
        XCTAssertEqual(repository.currentState.value, "optimistic")
        loader.complete(with: "older")

        XCTAssertEqual(repository.currentState, .loaded("optimistic"), "the load started before the value")
    }

    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_publishState_showsAFailureBesideTheValue_andIdleForgets() {
        let repository = ResourceRepository(loader: LoaderSpy<String>(), scheduler: ImmediateScheduler())

        repository.publish(state: .failed(TestError(id: 1), previous: "kept"))
        XCTAssertEqual(repository.currentState, .failed(TestError(id: 1), previous: "kept"))

        repository.publish(state: .idle)
        XCTAssertEqual(repository.currentState, .idle)
    }
}
