import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A `FriendsRepository` built from its parts, as before the store, keeps compiling (with a deprecation warning)
/// and keeps its behaviour: it reads the memory store, then the database, then the network, and pull-to-refresh
/// reaches the network.
final class DeprecatedFriendsAPITests: XCTestCase {
    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_aRepositoryFromItsParts_readsTheStoresFirst_andRefreshReachesTheNetwork() {
        let (ada, grace) = (makeFriend("1", name: "Ada"), makeFriend("2", name: "Grace"))
        let memory = InMemoryFriendsStore(CachedFriends(friends: [ada], timestamp: Date()))
        let network = LoaderSpy<[Friend]>()
        let repository = FriendsRepository(
            loader: AnyLoader(network), refreshLoader: AnyLoader(network), memoryStore: memory,
            databaseStore: InMemoryFriendsStore(), deleter: DeleterSpy(), scheduler: ImmediateScheduler())

        repository.load()
        XCTAssertEqual(repository.currentState, .loaded([ada]), "the memory store answers")
        XCTAssertEqual(network.loadCount, 0)

        repository.refresh()
        XCTAssertEqual(network.loadCount, 1, "pull-to-refresh reaches the network")
        network.complete(with: [ada, grace])
        XCTAssertEqual(repository.currentState, .loaded([ada, grace]))
    }

    @available(*, deprecated, message: "exercises the deprecated API on purpose")
    func test_aRepositoryFromItsParts_deletesOptimistically_andWipeEmptiesBothStores() throws {
        let ada = makeFriend("1", name: "Ada")
        let database = InMemoryFriendsStore(CachedFriends(friends: [ada], timestamp: Date()))
        let deleter = DeleterSpy()
        let repository = FriendsRepository(
            loader: AnyLoader(LoaderSpy<[Friend]>()), refreshLoader: AnyLoader(LoaderSpy<[Friend]>()),
            memoryStore: InMemoryFriendsStore(), databaseStore: database, deleter: deleter,
            scheduler: ImmediateScheduler())
        repository.load()
        XCTAssertEqual(repository.currentState, .loaded([ada]))

        repository.remove(id: "1")
        XCTAssertEqual(repository.currentState, .loaded([]), "gone at once")
        deleter.complete(with: .success(()))

        let wiped = expectation(description: "wiped")
        repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        let left = Locked<Result<CachedFriends?, any Error>?>(nil)
        database.retrieve { result in left.withLock { $0 = result } }
        XCTAssertNil(try left.withLock { $0 }?.get() ?? nil, "the database holds nothing after a wipe")
    }
}
