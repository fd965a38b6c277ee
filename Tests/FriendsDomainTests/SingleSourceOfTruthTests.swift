import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The friends feature runs on one store: deletes, loads, live updates and a logout, in every order, end with the
/// same friends shown, in memory and in the database.
final class SingleSourceOfTruthTests: XCTestCase {
    private let ada = makeFriend("1", name: "Ada"), grace = makeFriend("2", name: "Grace")
    private let linus = makeFriend("3", name: "Linus")

    // MARK: Deleted friends stay deleted

    func test_optimisticDelete_withALoadCompletingDuringTheServersAnswer_staysDeleted() throws {
        let sut = try makeLoadedSUT([ada, grace])

        sut.repository.remove(id: "1")
        sut.network.answer(with: [ada, grace])  // the server has not deleted Ada yet
        sut.repository.refresh()  // answered once the database has saved what it brought
        spinMainQueue { sut.repository.currentState == .loaded([grace]) }
        XCTAssertEqual(sut.repository.currentState, .loaded([grace]), "the pending delete stays applied")
        sut.deleter.complete(id: "1", with: .success(()))

        XCTAssertEqual(sut.repository.currentState, .loaded([grace]))
        try assertCaches(sut, hold: [grace])
    }

    func test_aLoadThatStartedBeforeAConfirmedDelete_doesNotBringTheFriendBack() throws {
        let sut = try makeLoadedSUT([ada, grace])
        sut.network.hold()
        sut.repository.refresh()  // the server answers with the list it had before the delete

        sut.repository.remove(id: "1")
        sut.deleter.complete(id: "1", with: .success(()))
        sut.network.releaseAll(with: [ada, grace, linus])

        spinMainQueue { sut.repository.currentState == .loaded([grace, linus]) }
        XCTAssertEqual(sut.repository.currentState, .loaded([grace, linus]), "the newcomer shows, Ada does not")
        try assertCaches(sut, hold: [grace, linus])
    }

    func test_confirmedDelete_thenALiveUpsertOfAnotherFriend_neverWritesTheDeletedOneBack() throws {
        let sut = try makeLoadedSUT([ada, grace])
        let lists = Locked<[[Friend]]>([])
        let subscription = sut.composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }
        spinMainQueue { lists.withLock { $0.last } == [ada, grace] }

        sut.repository.remove(id: "1")
        sut.deleter.complete(id: "1", with: .success(()))
        sut.updates.send(.upsert(makeFriend("2", name: "Grace H.")))

        spinMainQueue { lists.withLock { $0.last } == [makeFriend("2", name: "Grace H.")] }
        XCTAssertEqual(sut.repository.currentState, .loaded([makeFriend("2", name: "Grace H.")]))
        try assertCaches(sut, hold: [makeFriend("2", name: "Grace H.")])
        subscription.cancel()
    }

    func test_twoOverlappingOptimisticDeletes_theFirstRefused_theSecondAccepted() throws {
        let sut = try makeLoadedSUT([ada, grace, linus])

        sut.repository.remove(id: "1")
        sut.repository.remove(id: "2")
        XCTAssertEqual(sut.repository.currentState, .loaded([linus]))
        sut.deleter.complete(id: "1", with: .failure(FriendsAPIError.unexpectedStatus(500)))
        sut.deleter.complete(id: "2", with: .success(()))

        XCTAssertEqual(sut.repository.currentState, .loaded([ada, linus]), "only the refused delete is undone")
        try assertCaches(sut, hold: [ada, linus])
    }

    func test_hundredOverlappingDeletes_withLiveUpdatesAndLoads_noConfirmedDeleteComesBack() throws {
        let everyone = (0..<200).map { makeFriend("f\($0)") }
        let sut = try makeLoadedSUT(everyone)
        let stream = sut.composer.friendsStream().sink { _ in
        } receiveValue: { _ in
        }
        let deleted = (0..<100).map { "f\($0 * 2)" }
        let answered = DispatchGroup()

        sut.network.hold()  // every load of the storm answers later, with the list from before the deletes
        sut.repository.refresh()  // ... as the server had it before the storm began
        DispatchQueue.concurrentPerform(iterations: 300) { index in
            switch index % 3 {
            case 0:
                answered.enter()
                sut.repository.remove(id: deleted[index / 3]) { _ in answered.leave() }
            case 1: sut.updates.send(.upsert(makeFriend("f\(index / 3 * 2 + 1)", name: "Updated \(index)")))
            default: sut.repository.refresh()
            }
        }
        DispatchQueue.concurrentPerform(iterations: 100) { index in
            sut.deleter.complete(id: deleted[index], with: .success(()))
        }
        XCTAssertEqual(answered.wait(timeout: .now() + .watchdog), .success)
        sut.network.releaseAll(with: everyone)

        let shown = sut.repository.currentState.value ?? []
        XCTAssertTrue(Set(shown.map(\.id)).isDisjoint(with: deleted), "a deleted friend came back")
        XCTAssertEqual(shown.count, 100)
        XCTAssertEqual(shown.filter { $0.name.hasPrefix("Updated") }.count, 100, "no live update was lost either")
        try assertCaches(sut, hold: shown)
        stream.cancel()
    }

    // MARK: Logout

    func test_wipe_withADebouncedDatabaseSavePending_leavesNothingBehind() throws {
        let sut = try makeLoadedSUT([ada, grace])
        let subscription = sut.composer.friendsStream().sink { _ in
        } receiveValue: { _ in
        }
        sut.updates.send(.upsert(linus))  // saved to the database once the burst is over
        XCTAssertEqual(try retrieve(sut.memory), [ada, grace, linus])

        let wiped = expectation(description: "wiped")
        sut.repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        sut.scheduler.advance(by: .seconds(5))

        XCTAssertNil(try retrieve(sut.memory))
        XCTAssertNil(try retrieve(sut.database), "the pending save was cancelled: the next user starts empty")
        XCTAssertEqual(sut.repository.currentState, .idle)
        subscription.cancel()
    }

    func test_wipe_whileANonOptimisticDeleteWaits_cancelsIt_andItsAnswerFetchesAndSavesNothing() throws {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let events = Locked<[FriendsRepository.Event]>([])
        let sut = try makeLoadedSUT([ada, grace], database: SQLiteFriendsStore(fileURL: url))
        let subscription = sut.repository.events.sink { event in events.withLock { $0.append(event) } }
        let outcome = Locked<Result<Void, any Error>?>(nil)
        sut.repository.remove(id: "1", optimistic: false) { result in outcome.withLock { $0 = result } }
        let requestsBefore = sut.network.requestCount

        let wiped = expectation(description: "wiped")
        sut.repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        sut.deleter.complete(id: "1", with: .success(()))  // the server's answer arrives after the logout
        sut.scheduler.advance(by: .seconds(5))
        drainMainQueue()  // whatever the late answer started on the main queue ran

        XCTAssertEqual(sut.network.requestCount, requestsBefore, "no follow-up refresh")
        XCTAssertEqual(sut.repository.currentState, .idle)
        XCTAssertNil(try retrieve(sut.memory))
        XCTAssertNil(try retrieve(sut.database))
        XCTAssertNil(try retrieve(SQLiteFriendsStore(fileURL: url)), "nothing comes back after a restart either")
        XCTAssertEqual(events.withLock { $0.count }, 0, "a logout is not a failed deletion")
        XCTAssertThrowsError(try outcome.withLock { $0 }?.get()) { XCTAssertEqual($0 as? StoreError, .cleared) }
        subscription.cancel()
    }

    func test_wipe_whileAnOptimisticDeleteWaits_sendsNoDeletionFailedEvent() throws {
        let sut = try makeLoadedSUT([ada, grace])
        let events = Locked<[FriendsRepository.Event]>([])
        let subscription = sut.repository.events.sink { event in events.withLock { $0.append(event) } }
        let outcome = Locked<Result<Void, any Error>?>(nil)
        sut.repository.remove(id: "1", optimistic: true) { result in outcome.withLock { $0 = result } }

        let wiped = expectation(description: "wiped")
        sut.repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        sut.deleter.complete(id: "1", with: .success(()))

        XCTAssertEqual(events.withLock { $0.count }, 0, "no \"could not delete\" after a logout")
        XCTAssertThrowsError(try outcome.withLock { $0 }?.get()) { XCTAssertEqual($0 as? StoreError, .cleared) }
        XCTAssertEqual(sut.repository.currentState, .idle)
        subscription.cancel()
    }

    func test_aConfirmedNonOptimisticDelete_isInTheDatabaseWhenItIsReported() throws {
        let sut = try makeLoadedSUT([ada, grace])
        let reported = expectation(description: "reported")
        let savedWhenReported = Locked<[Friend]??>(nil)
        let database = sut.database
        sut.network.hold()  // the follow-up refresh saves nothing: what the database holds is the delete's save
        sut.repository.remove(id: "1", optimistic: false) { _ in
            DispatchQueue.global().async {  // not on the database's queue, which runs this completion
                let saved = try? awaitResult { database.retrieve(completion: $0) }?.get()?.friends
                savedWhenReported.withLock { $0 = .some(saved) }
                reported.fulfill()
            }
        }

        sut.deleter.complete(id: "1", with: .success(()))
        wait(for: [reported], timeout: .watchdog)

        XCTAssertEqual(savedWhenReported.withLock { $0 }, .some([grace]), "saved before the success is reported")
    }

    // MARK: Healing

    func test_unreadableDatabase_isDeletedAndCreatedAnew_theResetIsReported_andTheNextSaveWorks() throws {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        try Data(repeating: 0x42, count: 8_192).write(to: url)
        let events = Locked<[FriendsComposer.Event]>([])
        let sut = makeSUT(database: SQLiteFriendsStore(fileURL: url)) { event in events.withLock { $0.append(event) } }
        sut.network.answer(with: [ada])

        XCTAssertEqual(load(sut.composer.friendsLoader), [ada], "the network answers when the file cannot be read")
        sut.scheduler.advance(by: .seconds(1))

        let resets = events.withLock { $0 }.compactMap { event -> SQLiteError? in
            if case .reset(.database, let reason) = event { return reason as? SQLiteError }
            return nil
        }
        XCTAssertEqual(resets.map(\.isUnreadableDatabase), [true], "the reset is reported once, with its reason")
        XCTAssertEqual(try retrieve(sut.database), [ada])
        XCTAssertEqual(try retrieve(SQLiteFriendsStore(fileURL: url)), [ada], "the file works again")
    }

    func test_validateCaches_healsAnUnreadableDatabase_reportsIt_andDeletesExpiredFriends() throws {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        try Data(repeating: 0x42, count: 8_192).write(to: url)
        let memory = InMemoryFriendsStore(CachedFriends(friends: [ada], timestamp: fixedDate))
        let database = SQLiteFriendsStore(fileURL: url)
        let events = Locked<[FriendsComposer.Event]>([])
        let composer = FriendsComposer(
            memoryStore: memory, databaseStore: database, remote: AnyLoader { [] }, maxAge: .seconds(60),
            currentDate: { fixedDate.addingTimeInterval(61) },
            onEvent: { event in events.withLock { $0.append(event) } })

        let validated = expectation(description: "validated")
        composer.validateCaches { validated.fulfill() }
        wait(for: [validated], timeout: .watchdog)

        let resets = events.withLock { $0 }.filter { if case .reset(.database, _) = $0 { true } else { false } }
        XCTAssertEqual(resets.count, 1, "the unreadable database was deleted, created anew, and reported")
        XCTAssertNil(try retrieve(database), "and it reads again (empty)")
        XCTAssertNil(try retrieve(memory), "expired friends are deleted")
        database.replaceAll(with: [grace], timestamp: fixedDate) { _ in }
        XCTAssertEqual(try retrieve(database), [grace], "and it takes saves again")
    }

    // MARK: A friend by id

    func test_friendByID_comesFromTheListWhenItHoldsThem_elseFromTheAPI_whichJoinsTheList() throws {
        let api = KeyedLoaderSpy<Friend.ID, Friend>()
        let sut = try makeLoadedSUT([ada], remoteFriend: LoaderFamily { api[$0] })

        XCTAssertEqual(try awaitFriend(sut.composer.friend(id: "1"), answering: api), ada)
        XCTAssertEqual(api.loadCount(for: "1"), 0, "from the list, no request")

        XCTAssertEqual(try awaitFriend(sut.composer.friend(id: "2"), answering: api, with: grace), grace)
        XCTAssertEqual(sut.repository.currentState, .loaded([ada, grace]), "the list and the friend agree")
        XCTAssertEqual(try retrieve(sut.memory), [ada, grace])

        XCTAssertThrowsError(try awaitFriend(sut.composer.friend(id: "9"), answering: api, failing: true)) {
            guard case .notFound? = $0 as? FriendsAPIError else { return XCTFail("expected notFound, got \($0)") }
        }
    }

    func test_friendByID_tracesEachLoad_theListThenTheNetwork_withOneIdentityPerLoad() throws {
        let api = KeyedLoaderSpy<Friend.ID, Friend>()
        let events = Locked<[LoadEvent]>([])
        let sut = makeSUT(remoteFriend: LoaderFamily { api[$0] }) { event in
            if case .traced(let traced) = event { events.withLock { $0.append(traced) } }
        }

        XCTAssertEqual(try awaitFriend(sut.composer.friend(id: "2"), answering: api, with: grace), grace)

        let steps = events.withLock { $0 }.map { event -> String in
            switch event.kind {
            case .started: "started"
            case .stepStarted(let name): "\(name)?"
            case .stepSucceeded(let name, _): "\(name) hit"
            case .stepFailed(let name, let error, _): "\(name) miss \(error is CacheMiss ? "(absent)" : "")"
            case .succeeded: "succeeded"
            default: "other"
            }
        }
        XCTAssertEqual(steps, ["started", "list?", "list miss (absent)", "network?", "network hit", "succeeded"])
        XCTAssertEqual(Set(events.withLock { $0 }.map(\.load)).count, 1)
        XCTAssertEqual(events.withLock { $0 }.first?.label, "friend 2")
    }

    // MARK: Live updates before the first load

    func test_liveUpdatesArrivingBeforeTheFirstLoadCompletes_areAppliedToIt() {
        let sut = makeSUT()
        sut.network.hold()
        let lists = Locked<[[Friend]]>([])
        let subscription = sut.composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }

        sut.updates.send(.upsert(linus))
        sut.updates.send(.remove(id: "1"))
        spinMainQueue { sut.network.pendingCount == 1 }  // the caches missed: the network was asked
        sut.network.releaseAll(with: [ada, grace])  // the list the server had before those updates

        spinMainQueue { lists.withLock { $0.last } == [grace, linus] }
        XCTAssertEqual(lists.withLock { $0.last }, [grace, linus])
        XCTAssertFalse(lists.withLock { $0 }.contains([]), "never an empty list before the loaded one")
        subscription.cancel()
    }

    // MARK: - Helpers

    private struct SUT {
        let memory: InMemoryFriendsStore
        let database: SQLiteFriendsStore
        let network: ControllableNetwork
        let deleter: DeleterSpy
        let updates: UpdatesDouble
        let scheduler: TestScheduler
        let composer: FriendsComposer
        let repository: FriendsRepository
    }

    private func makeSUT(
        database: SQLiteFriendsStore = .inMemory(),
        remoteFriend: LoaderFamily<Friend.ID, Friend>? = nil,
        onEvent: @escaping @Sendable (FriendsComposer.Event) -> Void = { _ in }
    ) -> SUT {
        let memory = InMemoryFriendsStore()
        let network = ControllableNetwork()
        let deleter = DeleterSpy()
        let updates = UpdatesDouble()
        let scheduler = TestScheduler()
        let composer = FriendsComposer(
            memoryStore: memory, databaseStore: database, remote: network.eraseToAnyLoader(),
            remoteFriend: remoteFriend, updates: updates, saveDebounce: .milliseconds(500), scheduler: scheduler,
            onEvent: onEvent)
        let repository = FriendsRepository(
            store: composer.store, deleter: deleter, scheduler: ImmediateScheduler.immediate)
        return SUT(
            memory: memory, database: database, network: network, deleter: deleter, updates: updates,
            scheduler: scheduler, composer: composer, repository: repository)
    }

    private func makeLoadedSUT(
        _ friends: [Friend], remoteFriend: LoaderFamily<Friend.ID, Friend>? = nil,
        database: SQLiteFriendsStore = .inMemory()
    ) throws -> SUT {
        let sut = makeSUT(database: database, remoteFriend: remoteFriend)
        sut.network.answer(with: friends)
        sut.repository.load()  // the database misses on its own queue, then the network answers
        // Shown on the network's thread, where the levels' saves are issued right after: the memory level holds the
        // list once they are, and the database's debounced save is scheduled by then.
        spinMainQueue { sut.repository.currentState == .loaded(friends) && (try? retrieve(sut.memory)) == friends }
        XCTAssertEqual(sut.repository.currentState, .loaded(friends))
        try assertCaches(sut, hold: friends)
        return sut
    }

    /// Memory once the store's saves are issued, and the database once its debounced save has run.
    ///
    /// Both are waited for, briefly: the store shows a value before it issues its saves, and a debounced save whose
    /// timer fires while another thread is issuing the key's saves is issued by that thread, right after.
    private func assertCaches(
        _ sut: SUT, hold friends: [Friend], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        spinMainQueue { (try? retrieve(sut.memory)) == friends }
        XCTAssertEqual(try retrieve(sut.memory), friends, "memory", file: file, line: line)
        sut.scheduler.advance(by: .seconds(1))
        spinMainQueue { (try? retrieve(sut.database)) == friends }
        XCTAssertEqual(try retrieve(sut.database), friends, "database", file: file, line: line)
    }

    private func retrieve(_ store: any FriendsStore) throws -> [Friend]? {
        try awaitResult { store.retrieve(completion: $0) }?.get()?.friends
    }

    private func load(_ loader: AnyLoader<[Friend]>) -> [Friend]? {
        let result = Locked<[Friend]?>(nil)
        let done = expectation(description: "loaded")
        loader.load { outcome in
            result.withLock { $0 = try? outcome.get() }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return result.withLock { $0 }
    }

    private func awaitFriend(
        _ loader: AnyLoader<Friend>, answering api: KeyedLoaderSpy<Friend.ID, Friend>, with friend: Friend? = nil,
        failing: Bool = false
    ) throws -> Friend {
        let result = Locked<Result<Friend, any Error>?>(nil)
        let done = expectation(description: "friend")
        let asked = friend?.id ?? (failing ? "9" : nil)
        let askedBefore = asked.map { api.loadCount(for: $0) } ?? 0
        loader.load { outcome in
            result.withLock { $0 = outcome }
            done.fulfill()
        }
        // Answered from what the app holds, or the API asked.
        spinMainQueue { result.withLock { $0 } != nil || asked.map { api.loadCount(for: $0) > askedBefore } == true }
        if result.withLock({ $0 }) == nil, let friend { api.complete(friend.id, with: friend) }
        if result.withLock({ $0 }) == nil, failing { api.fail("9", with: FriendsAPIError.notFound) }
        wait(for: [done], timeout: .watchdog)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

}
