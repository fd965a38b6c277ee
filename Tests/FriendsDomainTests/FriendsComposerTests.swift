import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The composer's requirements, one test each, with test doubles for the stores, the network and the updates.
final class FriendsComposerTests: XCTestCase {
    func test_requirement1_memoryHitTouchesNeitherDatabaseNorNetwork() throws {
        let (sut, parts) = makeSUT()
        parts.memory.replaceAll(with: [makeFriend("m")], timestamp: fixedDate) { _ in }

        XCTAssertEqual(try load(sut.friendsLoader).get(), [makeFriend("m")])
        XCTAssertEqual(parts.events.started, [.memory])
        XCTAssertEqual(parts.network.loadCount, 0)
    }

    func test_requirement1_triesMemoryThenDatabaseThenNetworkInOrder() throws {
        let (sut, parts) = makeSUT()
        parts.network.completeWhenAsked(with: [makeFriend("n")])

        XCTAssertEqual(try load(sut.friendsLoader).get(), [makeFriend("n")])
        XCTAssertEqual(parts.events.started, [.memory, .database, .network])
    }

    func test_requirement2_databaseLoadIsCachedInMemoryOnly() throws {
        let (sut, parts) = makeSUT()
        parts.database.replaceAll(with: [makeFriend("d")], timestamp: fixedDate) { _ in }

        XCTAssertEqual(try load(sut.friendsLoader).get(), [makeFriend("d")])
        XCTAssertEqual(try retrieve(parts.memory)?.friends, [makeFriend("d")])
        XCTAssertEqual(parts.events.saved, [.memory])
        XCTAssertEqual(parts.network.loadCount, 0)
    }

    func test_requirement3_networkLoadIsCachedInDatabaseAndMemory() throws {
        let (sut, parts) = makeSUT()
        parts.network.completeWhenAsked(with: [makeFriend("n")])

        _ = load(sut.friendsLoader)

        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("n")])
        XCTAssertEqual(try retrieve(parts.memory)?.friends, [makeFriend("n")])
        XCTAssertEqual(Set(parts.events.saved), [.memory, .database])
    }

    func test_networkFailure_deliversNetworkErrorAndCachesNothing() {
        let (sut, parts) = makeSUT()
        parts.network.failWhenAsked(with: FriendsAPIError.unexpectedStatus(500))

        guard case .failure(FriendsAPIError.unexpectedStatus(500)) = load(sut.friendsLoader) else {
            return XCTFail("the chain fails with its last source's error")
        }
        XCTAssertNil(try retrieve(parts.memory))
        XCTAssertNil(try retrieve(parts.database))
        XCTAssertEqual(parts.events.saved, [])
    }

    func test_requirement5_expiredCachesCountAsMissing() throws {
        let clock = Locked(fixedDate)
        let (sut, parts) = makeSUT(maxAge: .seconds(60), currentDate: { clock.withLock { $0 } })
        parts.memory.replaceAll(with: [makeFriend("old")], timestamp: fixedDate) { _ in }
        parts.database.replaceAll(with: [makeFriend("old")], timestamp: fixedDate) { _ in }
        parts.network.completeWhenAsked(with: [makeFriend("new")])

        XCTAssertEqual(try load(sut.friendsLoader).get(), [makeFriend("old")], "fresh: memory hit")
        clock.withLock { $0 = fixedDate.addingTimeInterval(61) }
        XCTAssertEqual(try load(sut.friendsLoader).get(), [makeFriend("new")], "expired: network")
        XCTAssertEqual(try retrieve(parts.database)?.timestamp, fixedDate.addingTimeInterval(61))
    }

    func test_requirement4_liveUpdatesReplaceByIDAndAreCachedInMemoryAtOnce() throws {
        let updates = UpdatesDouble()
        let scheduler = TestScheduler()
        let (sut, parts) = makeSUT(updates: updates, scheduler: scheduler)
        parts.memory.replaceAll(with: [makeFriend("1"), makeFriend("2")], timestamp: fixedDate) { _ in }
        let lists = Locked<[[Friend]]>([])
        let subscription = sut.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }

        spinMainQueue { lists.withLock { $0.count } == 1 }
        let renamed = makeFriend("2", name: "Renamed")
        updates.send(.upsert(renamed))
        updates.send(.upsert(makeFriend("3")))
        updates.send(.remove(id: "1"))
        spinMainQueue { lists.withLock { $0.count } == 4 }

        XCTAssertEqual(
            lists.withLock { $0 },
            [
                [makeFriend("1"), makeFriend("2")],
                [makeFriend("1"), renamed],
                [makeFriend("1"), renamed, makeFriend("3")],
                [renamed, makeFriend("3")],
            ])
        XCTAssertEqual(try retrieve(parts.memory)?.friends, [renamed, makeFriend("3")], "memory is updated at once")
        XCTAssertNil(try retrieve(parts.database), "the database waits for the debounce")
        scheduler.advance(by: .milliseconds(500))
        XCTAssertEqual(try retrieve(parts.database)?.friends, [renamed, makeFriend("3")])
        subscription.cancel()
    }

    func test_flush_savesABurstOfLiveUpdatesBeforeTheDebounce_andANetworkLoadNeedsNone() throws {
        let updates = UpdatesDouble()
        let scheduler = TestScheduler()
        let (composer, parts) = makeSUT(updates: updates, scheduler: scheduler)
        parts.network.completeWhenAsked(with: [makeFriend("1")])
        let lists = Locked<[[Friend]]>([])
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }
        spinMainQueue { lists.withLock { $0.count } == 1 }
        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("1")], "a network load is saved at once")

        updates.send(.upsert(makeFriend("2")))
        spinMainQueue { lists.withLock { $0.count } == 2 }
        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("1")], "a live update waits for the burst")
        // Sample: begin
        // In the app's "did enter background" hook:
        composer.flush()
        // Sample: end

        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("1"), makeFriend("2")])
        subscription.cancel()
    }

    func test_requirement5_burstOfUpdatesCausesFewDatabaseWritesAndSavesTheLastState() throws {
        let updates = UpdatesDouble()
        let scheduler = TestScheduler()
        let (sut, parts) = makeSUT(updates: updates, scheduler: scheduler)
        parts.memory.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        let count = Locked(0)
        let subscription = sut.friendsStream().sink { _ in
        } receiveValue: { _ in
            count.withLock { $0 += 1 }
        }
        spinMainQueue { count.withLock { $0 } == 1 }

        for index in 0..<1_000 {
            updates.send(.upsert(makeFriend("1", name: "Name \(index)")))
            if index % 250 == 249 {
                scheduler.advance(by: .milliseconds(500))
            }  // a pause every 250 updates
            else {
                scheduler.advance(by: .milliseconds(1))
            }
        }
        scheduler.advance(by: .seconds(1))
        spinMainQueue { count.withLock { $0 } == 1_001 }

        XCTAssertEqual(parts.events.saved.filter { $0 == .database }.count, 4, "one write per quiet period")
        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("1", name: "Name 999")])
        subscription.cancel()
    }

    func test_cancellingTheStream_keepsTheWaitingSave_theStoreWritesItWhenTheBurstIsOver() throws {
        let updates = UpdatesDouble()
        let scheduler = TestScheduler()
        let (sut, parts) = makeSUT(updates: updates, scheduler: scheduler)
        parts.memory.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        let count = Locked(0)
        let subscription = sut.friendsStream().sink { _ in
        } receiveValue: { _ in
            count.withLock { $0 += 1 }
        }
        spinMainQueue { count.withLock { $0 } == 1 }

        updates.send(.upsert(makeFriend("1", name: "Last")))
        subscription.cancel()
        XCTAssertEqual(try retrieve(parts.memory)?.friends, [makeFriend("1", name: "Last")], "memory at once")
        scheduler.advance(by: .milliseconds(500))

        XCTAssertEqual(try retrieve(parts.database)?.friends, [makeFriend("1", name: "Last")])
    }

    // MARK: - Helpers

    private struct Parts {
        let memory = InMemoryFriendsStore()
        let database = InMemoryFriendsStore()
        let network = NetworkDouble()
        let events = EventLog()
    }

    private func makeSUT(
        maxAge: Duration? = nil,
        updates: UpdatesDouble? = nil,
        scheduler: some Scheduler = ImmediateScheduler.immediate,
        currentDate: @escaping @Sendable () -> Date = { fixedDate }
    ) -> (FriendsComposer, Parts) {
        let parts = Parts()
        let sut = FriendsComposer(
            memoryStore: parts.memory, databaseStore: parts.database, remote: parts.network.eraseToAnyLoader(),
            updates: updates, maxAge: maxAge, saveDebounce: .milliseconds(500), scheduler: scheduler,
            currentDate: currentDate, onEvent: parts.events.record)
        return (sut, parts)
    }

    private func load(_ loader: AnyLoader<[Friend]>) -> Result<[Friend], any Error> {
        let done = expectation(description: "loaded")
        let box = Locked<Result<[Friend], any Error>?>(nil)
        loader.load { result in
            XCTAssertTrue(Thread.isMainThread, "results are delivered on the main queue")
            box.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return box.withLock { $0 } ?? .failure(AnyError())
    }

    private func retrieve(_ store: any FriendsStore) throws -> CachedFriends? {
        try awaitResult { store.retrieve(completion: $0) }?.get()
    }

}

/// A network that answers as the test says, counting loads.
final class NetworkDouble: Loader {
    private let state = Locked((answer: Result<[Friend], any Error>.failure(AnyError()), loads: 0))

    var loadCount: Int { state.withLock { $0.loads } }

    func completeWhenAsked(with friends: [Friend]) { state.withLock { $0.answer = .success(friends) } }
    func failWhenAsked(with error: any Error) { state.withLock { $0.answer = .failure(error) } }

    func load(completion: @escaping LoadCompletion<[Friend]>) -> any CancellationToken {
        let answer = state.withLock { state in
            state.loads += 1
            return state.answer
        }
        DispatchQueue.global().async { completion(answer) }
        return AnyCancellationToken {}
    }
}

/// Live updates sent by the test.
final class UpdatesDouble: FriendsUpdatesSource {
    private let subject = StreamSubject<FriendUpdate, any Error>()
    func updates() -> EventStream<FriendUpdate, any Error> { subject.stream }
    func send(_ update: FriendUpdate) { subject.send(update) }
}

/// The composer's events, as the test reads them.
final class EventLog: Sendable {
    private let events = Locked<[FriendsComposer.Event]>([])

    var record: @Sendable (FriendsComposer.Event) -> Void { { event in self.events.withLock { $0.append(event) } } }

    var started: [FriendsComposer.Source] {
        events.withLock { $0 }.compactMap { if case .started(let source) = $0 { return source } else { return nil } }
    }

    var saved: [FriendsComposer.Source] {
        events.withLock { $0 }.compactMap { if case .saved(let source, _) = $0 { return source } else { return nil } }
    }
}
