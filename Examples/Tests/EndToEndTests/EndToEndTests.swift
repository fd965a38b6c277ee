import Foundation
import FriendsDomain
import FriendsServer
import Loading
import LoadingTestSupport
import XCTest

/// The library against the embedded API over real loopback HTTP and a real SQLite file.
final class EndToEndTests: XCTestCase {
    func test_composedChainLoadsFromTheNetworkAndCachesToTheFile() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        let composer = FriendsComposer(
            configuration: .init(baseURL: server.baseURL, databaseURL: databaseURL), session: makeSession())

        XCTAssertEqual(try load(composer.friendsLoader)?.get(), sampleFriends())
        XCTAssertEqual(server.listRequestCount, 1)
        waitUntil { self.storedFriends(at: databaseURL) == sampleFriends() }  // the save runs beside the delivery
    }

    func test_deleteSendsTheIdAsOneSegment_soNoIdReachesAnotherResource() throws {
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        let tricky = ["a/b", "..", "../friends", "é è"].map {
            Friend(id: $0, name: $0, status: .online, updatedAt: start)
        }
        let server = try makeServer(for: self, friends: sampleFriends() + tricky)
        let deleter = RemoteFriendsDeleter(
            baseURL: server.baseURL, client: URLSessionHTTPClient(session: makeSession()))

        for friend in tricky {
            XCTAssertNoThrow(try deleter.deleteAndWait(id: friend.id), "id \(friend.id.debugDescription)")
        }

        XCTAssertEqual(server.friends, sampleFriends(), "exactly the tricky ids were deleted, nothing else")
        XCTAssertThrowsError(try deleter.deleteAndWait(id: "")) { error in
            guard case FriendsAPIError.invalidID = error else { return XCTFail("expected invalidID, got \(error)") }
        }
        XCTAssertEqual(server.deleteRequestCount, tricky.count, "the empty id sent nothing")
    }

    func test_fortyThousandFriendsLoadThroughTheDefaultComposer() throws {
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        let many = (0..<40_000).map {
            Friend(id: "u\($0)", name: "Friend \($0)", status: .online, updatedAt: start.addingTimeInterval(Double($0)))
        }
        let server = try makeServer(for: self, friends: many)
        let databaseURL = makeDatabaseURL(for: self)
        let composer = FriendsComposer(
            configuration: .init(baseURL: server.baseURL, databaseURL: databaseURL), session: makeSession())

        let loaded = try load(composer.friendsLoader)?.get()

        XCTAssertEqual(loaded?.count, many.count)
        XCTAssertEqual(loaded?.last, many.last)
        XCTAssertEqual(server.listRequestCount, 1, "within the first attempt's 10 s")
    }

    func test_secondComposerLoadsFromTheFileWhileTheServerIsDown() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        let configuration = FriendsComposer.Configuration(
            baseURL: server.baseURL, databaseURL: databaseURL, retry: .immediate(maxAttempts: 1))
        _ = load(FriendsComposer(configuration: configuration, session: makeSession()).friendsLoader)
        waitUntil { self.storedFriends(at: databaseURL) == sampleFriends() }
        server.stop()

        let restarted = FriendsComposer(configuration: configuration, session: makeSession())
        XCTAssertEqual(try load(restarted.friendsLoader)?.get(), sampleFriends())
        XCTAssertEqual(server.listRequestCount, 1)
    }

    func test_badResponsesGiveTypedErrorsAndLeaveTheCachedDataIntact() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        let cached = [sampleFriends(1)[0]]
        let database = LocalFriendsLoader(store: SQLiteFriendsStore(fileURL: databaseURL))
        _ = awaitSave(cached, to: database)
        let remote = RemoteFriendsLoader(baseURL: server.baseURL, client: URLSessionHTTPClient(session: makeSession()))
            .caching(to: database)

        server.setListBehavior(.malformedJSON)
        guard case .failure(FriendsAPIError.invalidData)? = load(remote) else {
            return XCTFail("malformed JSON: invalidData")
        }
        server.setListBehavior(.status(500))
        guard case .failure(FriendsAPIError.unexpectedStatus(500))? = load(remote) else {
            return XCTFail("HTTP 500: unexpectedStatus")
        }
        server.setListBehavior(.dropMidBody)
        guard case .failure(FriendsAPIError.connectivity)? = load(remote) else {
            return XCTFail("dropped mid-body: connectivity")
        }

        XCTAssertEqual(storedFriends(at: databaseURL), cached, "no failure touched the cache")
    }

    func test_cancellingALoadInFlightCancelsTheHTTPRequest() throws {
        let server = try makeServer(for: self)
        server.setListBehavior(.slow(seconds: 5))
        let remote = RemoteFriendsLoader(baseURL: server.baseURL, client: URLSessionHTTPClient(session: makeSession()))
        let completed = Locked(false)

        let token = remote.load { _ in completed.withLock { $0 = true } }
        waitUntil { server.listRequestCount == 1 }
        token.cancel()

        waitUntil { server.slowHandlerSawDisconnect }
        XCTAssertFalse(server.slowHandlerAnswered, "the server saw the connection closed before it could answer")
        // Proof of absence: URLSession ended the cancelled task as the connection closed; a completion comes then.
        RunLoop.current.run(until: Date().addingTimeInterval(0.2))
        XCTAssertFalse(completed.withLock { $0 }, "a cancelled load never completes")
    }

    func test_liveUpdatesOverServerSentEventsArriveAreMergedAndSaved() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        let (_, lists, subscription) = liveComposer(
            server: server, databaseURL: databaseURL, saveDebounce: .milliseconds(100))
        waitUntil { lists.withLock { $0.count } == 1 && server.openEventStreams == 1 }

        var renamed = sampleFriends()[1]
        renamed.name = "Renamed over SSE"
        let newcomer = Friend(
            id: "u9", name: "Newcomer", status: .online, updatedAt: Date(timeIntervalSince1970: 1_795_000_100))
        server.push(.upsert(renamed))
        server.push(.upsert(newcomer))
        server.push(.remove(id: "u1"))
        let expected = [renamed, sampleFriends()[2], newcomer]
        waitUntil { lists.withLock { $0.last } == expected }
        waitUntil { self.storedFriends(at: databaseURL) == expected }

        subscription.cancel()
    }

    func test_aConfirmedDeleteStaysDeleted_throughALoadAnsweredMeanwhileAndALiveUpdateAfter() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        let (composer, lists, subscription) = liveComposer(
            server: server, databaseURL: databaseURL, saveDebounce: .milliseconds(100))
        let repository = FriendsRepository(composer: composer)
        waitUntil { lists.withLock { $0.last } == sampleFriends() && server.openEventStreams == 1 }

        server.setLatency(.milliseconds(300))
        repository.refresh()  // the server reads its list (Ada included) now, and answers in 300 ms
        waitUntil { server.listRequestCount == 2 }
        let deleted = Locked<Result<Void, any Error>?>(nil)
        repository.remove(id: "u1", optimistic: true) { result in deleted.withLock { $0 = result } }
        waitUntil { deleted.withLock { $0 } != nil }
        XCTAssertNoThrow(try deleted.withLock { $0 }?.get())
        server.setLatency(.milliseconds(5))
        var renamed = sampleFriends()[1]
        renamed.name = "Renamed after the delete"
        server.push(.upsert(renamed))

        let expected = [renamed, sampleFriends()[2]]
        waitUntil { lists.withLock { $0.last } == expected }
        waitUntil { repository.currentState.value == expected }
        waitUntil { self.storedFriends(at: databaseURL) == expected }
        XCTAssertFalse(lists.withLock { $0.last }?.contains { $0.id == "u1" } ?? true, "the deleted friend is gone")
        subscription.cancel()
    }

    func test_aRenameMadeOfflineWhileTheServerRenamedTheFriend_isRebasedOrGivesWay() throws {
        for keepsMine in [true, false] {
            let server = try makeServer(for: self)
            let databaseURL = makeDatabaseURL(for: self)
            let connectivity = ManualConnectivity(isOnline: false)
            let composer = FriendsComposer(
                configuration: .init(
                    baseURL: server.baseURL, databaseURL: databaseURL, connectivity: connectivity,
                    resolveRenameConflict: { _ in keepsMine ? .rebase : .takeServerCopy }),
                session: makeSession())
            connectivity.setOnline(true)
            let ada = try XCTUnwrap(try load(composer.friendsLoader)?.get().first)
            connectivity.setOnline(false)
            let outcome = Locked<Result<Void, any Error>?>(nil)

            try composer.renameFriend(ada, to: "Ada (mine)") { result in outcome.withLock { $0 = result } }
            XCTAssertEqual(try load(composer.friendsLoader)?.get().first?.name, "Ada (mine)", "renamed at once")
            server.renameOnServer(ada.id, to: "Ada (theirs)")
            connectivity.setOnline(true)
            waitUntil { outcome.withLock { $0 } != nil }

            let expected = keepsMine ? "Ada (mine)" : "Ada (theirs)"
            XCTAssertEqual(server.friends.first?.name, expected, "the server, keeping mine: \(keepsMine)")
            XCTAssertEqual(try load(composer.friendsLoader)?.get().first?.name, expected, "the list agrees")
            XCTAssertEqual(server.renameRequestCount, keepsMine ? 2 : 1, "the conflict, then the rebased rename")
            if keepsMine {
                XCTAssertNoThrow(try outcome.withLock { $0 }?.get())
            } else {
                XCTAssertThrowsError(try outcome.withLock { $0 }?.get()) { error in
                    XCTAssertEqual(error as? MutationConflictError, .replacedByServerCopy)
                }
            }
            waitUntil { self.storedFriends(at: databaseURL)?.first?.name == expected }
        }
    }

    func test_logoutWithALiveSubscriptionAndADebouncedSavePending_leavesNothingOnDisk() throws {
        let server = try makeServer(for: self)
        let databaseURL = makeDatabaseURL(for: self)
        // The debounce runs on a scheduler the test moves: the cancelled save's moment comes when the test says.
        let scheduler = TestScheduler()
        let (composer, lists, subscription) = liveComposer(
            server: server, databaseURL: databaseURL, saveDebounce: .milliseconds(300), scheduler: scheduler)
        let repository = FriendsRepository(composer: composer)
        waitUntil { lists.withLock { $0.last } == sampleFriends() && server.openEventStreams == 1 }
        waitUntil { self.storedFriends(at: databaseURL) == sampleFriends() }

        let newcomer = Friend(
            id: "u9", name: "Newcomer", status: .online, updatedAt: Date(timeIntervalSince1970: 1_795_000_100))
        server.push(.upsert(newcomer))
        waitUntil { lists.withLock { $0.last }?.contains(newcomer) == true }
        XCTAssertGreaterThan(scheduler.pendingCount, 0, "its database save waits for the debounce")
        let wiped = expectation(description: "wiped")
        repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        scheduler.advance(by: .seconds(1))  // past the debounce: the save, had it not been cancelled, runs now

        XCTAssertNil(storedFriends(at: databaseURL), "the pending save was cancelled: nothing reappears on disk")
        XCTAssertEqual(lists.withLock { $0.last }, [], "the screen shows nothing")
        subscription.cancel()
    }

    func test_reconnectsAfterTheServerDropsTheEventStream() throws {
        let server = try makeServer(for: self)
        let updates = ServerSentEventsFriendsUpdates(
            baseURL: server.baseURL, configuration: makeSession().configuration,
            reconnection: .constant(.milliseconds(50), maxAttempts: 10))
        let received = Locked<[FriendUpdate]>([])
        let subscription = updates.updates().sink { _ in
        } receiveValue: { update in
            received.withLock { $0.append(update) }
        }
        waitUntil { server.openEventStreams == 1 }
        server.push(.remove(id: "u1"))
        waitUntil { received.withLock { $0.count } == 1 }

        server.dropEventStreams()
        waitUntil { server.eventConnectionCount == 2 && server.openEventStreams == 1 }
        server.push(.remove(id: "u2"))
        waitUntil { received.withLock { $0.count } == 2 }

        XCTAssertEqual(received.withLock { $0 }, [.remove(id: "u1"), .remove(id: "u2")])
        subscription.cancel()
    }

    /// A composer on `server` and the file at `databaseURL`, with every list its stream delivers recorded.
    private func liveComposer(
        server: FriendsAPIServer, databaseURL: URL, saveDebounce: Duration,
        scheduler: some Scheduler = DispatchQueueScheduler.global()
    ) -> (FriendsComposer, Locked<[[Friend]]>, StreamSubscription) {
        let composer = FriendsComposer(
            configuration: .init(baseURL: server.baseURL, databaseURL: databaseURL, saveDebounce: saveDebounce),
            session: makeSession(), scheduler: scheduler)
        let lists = Locked<[[Friend]]>([])
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }
        return (composer, lists, subscription)
    }

    private func awaitSave(_ friends: [Friend], to cache: LocalFriendsLoader) -> Bool {
        let done = expectation(description: "saved")
        cache.save(friends) { _ in done.fulfill() }
        wait(for: [done], timeout: .watchdog)
        return true
    }
}

extension RemoteFriendsDeleter {
    fileprivate func deleteAndWait(id: Friend.ID) throws {
        let outcome = Locked<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        delete(id: id) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        _ = done.wait(timeout: .now() + .watchdog)
        try outcome.withLock { $0 }?.get()
    }
}
