import Foundation
import FriendsDomain
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class FriendsRepositoryTests: XCTestCase {
    private let ada = makeFriend("1", name: "Ada"), grace = makeFriend("2", name: "Grace")

    func test_aRepositoryOfAComposer_readsWithTheComposersMaxAge() {
        let clock = TestClock()
        let (ada, grace) = (makeFriend("1", name: "Ada"), makeFriend("2", name: "Grace"))
        let network = LoaderSpy<[Friend]>()
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(CachedFriends(friends: [ada], timestamp: clock.now)),
            databaseStore: InMemoryFriendsStore(), remote: AnyLoader(network), maxAge: .seconds(300),
            scheduler: ImmediateScheduler.immediate, currentDate: { clock.now })
        let repository = FriendsRepository(composer: composer, scheduler: ImmediateScheduler.immediate)

        repository.load()
        XCTAssertEqual(repository.currentState, .loaded([ada]))
        clock.advance(by: 3_600)
        repository.load()

        XCTAssertEqual(network.loadCount, 1, "an hour-old list is not served: the composer's max age counts")
        network.complete(with: [ada, grace])
        XCTAssertEqual(repository.currentState, .loaded([ada, grace]))
    }

    func test_twoThousandConcurrentColdLoads_makeOneNetworkRequest() {
        let friends = [makeFriend("1", name: "Ada")]
        let network = LoaderSpy<[Friend]>()
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore.inMemory(),
            remote: AnyLoader(network), scheduler: ImmediateScheduler.immediate)
        let loaded = expectation(description: "every load answered")
        loaded.expectedFulfillmentCount = 2_000
        let answers = Locked<[[Friend]]>([])

        DispatchQueue.concurrentPerform(iterations: 2_000) { _ in
            _ = composer.friendsLoader.load { result in
                answers.withLock { $0.append((try? result.get()) ?? []) }
                loaded.fulfill()
            }
        }
        XCTAssertTrue(eventually { network.loadCount >= 1 })
        network.complete(with: friends)
        wait(for: [loaded], timeout: .watchdog)

        XCTAssertEqual(network.loadCount, 1, "every cold load joined the one fetch in flight, or read its value")
        XCTAssertEqual(answers.withLock { $0.count }, 2_000)
        XCTAssertTrue(answers.withLock { $0.allSatisfy { $0 == friends } })
    }

    func test_optimisticDelete_publishesAtOnceAndCachesMatchOnSuccess() throws {
        let (sut, parts) = try makeLoadedSUT()
        let states = StreamRecorder(sut.state)

        let done = expectation(description: "removed")
        sut.remove(id: "1", optimistic: true) { _ in done.fulfill() }
        XCTAssertEqual(states.values.last, .loaded([grace]), "published before the server answers")
        parts.deleter.complete(with: .success(()))
        wait(for: [done], timeout: .watchdog)

        XCTAssertEqual(parts.deleter.deletedIDs, ["1"])
        XCTAssertEqual(try retrieve(parts.memory), [grace])
        XCTAssertEqual(try retrieve(parts.database), [grace])
        XCTAssertEqual(sut.currentState, .loaded([grace]))
    }

    func test_optimisticDelete_rollsBackPublishesErrorEventAndCachesMatchOnFailure() throws {
        let (sut, parts) = try makeLoadedSUT()
        let states = StreamRecorder(sut.state)
        let events = Locked<[String]>([])
        let subscription = sut.events.sink { event in
            if case .deletionFailed(let id, let error) = event { events.withLock { $0.append("\(id): \(error)") } }
        }

        let done = expectation(description: "removed")
        sut.remove(id: "1", optimistic: true) { _ in done.fulfill() }
        parts.deleter.complete(with: .failure(FriendsAPIError.unexpectedStatus(500)))
        wait(for: [done], timeout: .watchdog)

        XCTAssertEqual(states.values, [.loaded([ada, grace]), .loaded([grace]), .loaded([ada, grace])])
        XCTAssertEqual(events.withLock { $0 }, ["1: The friends API answered with status 500."])
        XCTAssertEqual(try retrieve(parts.memory), [ada, grace])
        XCTAssertEqual(try retrieve(parts.database), [ada, grace])
        subscription.cancel()
    }

    func test_pessimisticDelete_changesNothingUntilTheServerAgrees_thenShowsTheServersTruth() throws {
        let (sut, parts) = try makeLoadedSUT()
        let states = StreamRecorder(sut.state)

        let done = expectation(description: "removed")
        sut.remove(id: "1", optimistic: false) { _ in done.fulfill() }
        XCTAssertEqual(states.values.last, .loaded([ada, grace]), "nothing disappears before the server agrees")
        parts.network.answer(with: [grace, makeFriend("3")])  // the server's truth after the delete
        parts.deleter.complete(with: .success(()))
        wait(for: [done], timeout: .watchdog)
        waitUntil { sut.currentState == .loaded([grace, makeFriend("3")]) }

        XCTAssertEqual(sut.currentState, .loaded([grace, makeFriend("3")]))
        XCTAssertEqual(try retrieve(parts.memory), [grace, makeFriend("3")])
        waitUntil { (try? retrieve(parts.database)) == [grace, makeFriend("3")] }
        XCTAssertEqual(try retrieve(parts.database), [grace, makeFriend("3")])
    }

    func test_wipeDuringAnInFlightLoad_publishesNothingStaleAndEmptiesBothStores() throws {
        let (sut, parts) = makeSUT()
        let states = StreamRecorder(sut.state)
        parts.network.hold()
        sut.load()
        waitUntil { parts.network.pendingCount == 1 }

        let wiped = expectation(description: "wiped")
        sut.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        parts.network.releaseAll(with: [ada])  // answered here, and dropped: the wipe came first

        XCTAssertEqual(states.values, [.idle, .loading(previous: nil), .idle])
        XCTAssertNil(try awaitResult { parts.memory.retrieve(completion: $0) }?.get())
        XCTAssertNil(try awaitResult { parts.database.retrieve(completion: $0) }?.get())
    }

    // MARK: - Helpers

    private struct Parts {
        let memory = InMemoryFriendsStore()
        let database = SQLiteFriendsStore.inMemory()
        let network = ControllableNetwork()
        let deleter = DeleterSpy()
    }

    private func makeSUT() -> (FriendsRepository, Parts) {
        let parts = Parts()
        let composer = FriendsComposer(
            memoryStore: parts.memory, databaseStore: parts.database, remote: parts.network.eraseToAnyLoader(),
            scheduler: ImmediateScheduler.immediate)
        let sut = FriendsRepository(
            store: composer.store, deleter: parts.deleter, scheduler: ImmediateScheduler.immediate)
        return (sut, parts)
    }

    private func makeLoadedSUT() throws -> (FriendsRepository, Parts) {
        let (sut, parts) = makeSUT()
        parts.network.answer(with: [ada, grace])
        let loaded = expectation(description: "loaded")
        sut.load()
        let expected = [ada, grace]
        let subscription = sut.state.sink { if $0 == .loaded(expected) { loaded.fulfill() } }
        wait(for: [loaded], timeout: .watchdog)
        subscription.cancel()
        // Shown once confirmed; the database holds it once its save lands.
        waitUntil { (try? retrieve(parts.database)) == [ada, grace] }
        XCTAssertEqual(try retrieve(parts.database), [ada, grace])
        return (sut, parts)
    }

    private func retrieve(_ store: any FriendsStore) throws -> [Friend]? {
        try awaitResult { store.retrieve(completion: $0) }?.get()?.friends
    }

    private func waitUntil(_ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        spinMainQueue(until: condition, file: file, line: line)
    }
}

/// A network that answers at once with a set list, or holds requests until released.
final class ControllableNetwork: Loader {
    private struct State: Sendable {
        var answer: [Friend] = []
        var holding = false
        var pending: [Int: LoadCompletion<[Friend]>] = [:]
        var nextID = 0
    }

    private let state = Locked(State())

    var pendingCount: Int { state.withLock { $0.pending.count } }
    /// How many loads were asked.
    var requestCount: Int { state.withLock { $0.nextID } }

    func answer(with friends: [Friend]) {
        state.withLock {
            $0.answer = friends
            $0.holding = false
        }
    }
    func hold() { state.withLock { $0.holding = true } }

    func releaseAll(with friends: [Friend]) {
        let pending = state.withLock { state in
            defer { state.pending = [:] }
            return state.pending.values
        }
        for element in pending { element(.success(friends)) }
    }

    func load(completion: @escaping LoadCompletion<[Friend]>) -> any CancellationToken {
        let (immediate, id) = state.withLock { state -> ([Friend]?, Int) in
            state.nextID += 1
            guard state.holding else { return (state.answer, state.nextID) }
            state.pending[state.nextID] = completion
            return (nil, state.nextID)
        }
        if let immediate { completion(.success(immediate)) }
        return AnyCancellationToken { [state] in state.withLock { _ = $0.pending.removeValue(forKey: id) } }
    }
}

/// A deleter whose requests the test completes.
final class DeleterSpy: FriendDeleting {
    private let requests = Locked<[(id: Friend.ID, completion: @Sendable (Result<Void, any Error>) -> Void)]>([])

    var deletedIDs: [Friend.ID] { requests.withLock { $0.map(\.id) } }

    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> any CancellationToken
    {
        requests.withLock { $0.append((id, completion)) }
        return AnyCancellationToken {}
    }

    func complete(with result: Result<Void, any Error>) {
        requests.withLock { $0.last?.completion }?(result)
    }

    /// Completes the (first) request that deletes `id`.
    func complete(id: Friend.ID, with result: Result<Void, any Error>) {
        requests.withLock { $0.first { $0.id == id }?.completion }?(result)
    }
}
