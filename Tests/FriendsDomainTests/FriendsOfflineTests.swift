import Foundation
import FriendsDomain
import Loading
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The friends composition offline: deletes wait on disk and reach the server in order after a restart, reads
/// answer from the caches without a request, a foreground revalidates an old list, and the list comes a page at a
/// time.
final class FriendsOfflineTests: XCTestCase {
    override func setUp() {
        super.setUp()
        URLProtocolStub.reset()
    }

    func test_deletesMadeOffline_surviveARestart_andReachTheServerInOrder_withIdempotencyKeys() throws {
        let database = try seededDatabase()
        URLProtocolStub.stub(.response(status: 204, body: Data()))
        do {
            let offline = ManualConnectivity(isOnline: false)
            let composer = makeComposer(database, connectivity: offline)
            XCTAssertEqual(shown(composer)?.count, 3)
            composer.deleteFriend(id: "u1")
            composer.deleteFriend(id: "u2")
            XCTAssertEqual(shown(composer)?.map(\.id), ["u3"], "gone at once")
            XCTAssertEqual(composer.pendingDeletes?.pending.map(\.input), ["u1", "u2"])
        }
        XCTAssertEqual(URLProtocolStub.requests.count, 0, "offline: nothing was sent")

        // The next launch: the deletes show again before anything is sent, then go when the network is back.
        let connectivity = ManualConnectivity(isOnline: false)
        let relaunched = makeComposer(database, connectivity: connectivity)
        XCTAssertEqual(shown(relaunched)?.map(\.id), ["u3"])
        connectivity.setOnline(true)

        XCTAssertTrue(eventually { relaunched.pendingDeletes?.isMutating == false })
        let deletes = URLProtocolStub.requests.filter { $0.httpMethod == "DELETE" }
        XCTAssertEqual(deletes.map { $0.url?.lastPathComponent }, ["u1", "u2"])
        let keys = deletes.compactMap { $0.value(forHTTPHeaderField: "Idempotency-Key") }
        XCTAssertEqual(keys.count, 2)
        XCTAssertEqual(Set(keys).count, 2)
        let saved = try awaitResult { SQLiteFriendsStore(fileURL: database).retrieve(completion: $0) }?.get()
        XCTAssertEqual(saved?.friends.map(\.id), ["u3"], "and the database holds the list without them")
    }

    func test_aDeleteTheServerRefuses_showsTheFriendAgain_andIsForgotten() throws {
        let database = try seededDatabase()
        URLProtocolStub.stub(.response(status: 409, body: Data()))
        let composer = makeComposer(database, connectivity: ManualConnectivity(isOnline: true))
        XCTAssertEqual(shown(composer)?.count, 3)

        let result = awaitResult { composer.deleteFriend(id: "u1", completion: $0) }

        guard case .failure? = result else { return XCTFail("refused, got \(String(describing: result))") }
        XCTAssertEqual(shown(composer)?.map(\.id), ["u1", "u2", "u3"])
        XCTAssertEqual(composer.pendingDeletes?.isMutating, false)
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
    }

    func test_aDeleteThatFindsTheFriendGoneAlready_isSettled() throws {
        let database = try seededDatabase()
        URLProtocolStub.stub(.response(status: 404, body: Data()))
        let composer = makeComposer(database, connectivity: ManualConnectivity(isOnline: true))
        XCTAssertEqual(shown(composer)?.count, 3)

        let result = awaitResult { composer.deleteFriend(id: "u1", completion: $0) }

        XCTAssertNoThrow(try result?.get(), "a delete sent again after its answer was lost finds nothing: it holds")
        XCTAssertEqual(shown(composer)?.map(\.id), ["u2", "u3"])
    }

    func test_offline_aNetworkReadAnswersFromTheDatabase_withoutARequest() throws {
        let database = try seededDatabase()
        let composer = makeComposer(database, connectivity: ManualConnectivity(isOnline: false))

        let read = LoadRecorder<StoreResponse<[Friend]>>()
        _ = read.load(composer.store.read(.all, policy: .networkFirst))
        XCTAssertTrue(eventually { read.count == 1 })

        XCTAssertEqual(read.values.first?.value?.count, 3)
        XCTAssertEqual(read.values.first?.error as? OfflineError, OfflineError(), "said why it is not fresh")
        XCTAssertEqual(URLProtocolStub.requests.count, 0)
    }

    func test_comingToTheForeground_fetchesAnOldListTheScreenShows() throws {
        let database = try seededDatabase()
        let clock = TestClock(fixedDate)
        let lifecycle = ManualAppLifecycle()
        URLProtocolStub.stub(.response(status: 200, body: try listBody([makeFriend("u9")])))
        let composer = makeComposer(
            database, connectivity: nil, lifecycle: lifecycle, maxAge: .seconds(60), now: { clock.now })
        let observed = StreamRecorder(composer.store.changes(for: .all))
        XCTAssertEqual(shown(composer)?.count, 3)

        lifecycle.enterForeground()
        XCTAssertEqual(URLProtocolStub.requests.count, 0, "young enough")
        clock.advance(by: 61)
        lifecycle.enterForeground()

        XCTAssertTrue(eventually { observed.values.last?.value?.map(\.id) == ["u9"] })
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
    }

    func test_friendPages_loadTheListAPageAtATime() throws {
        let database = try seededDatabase()
        let friends = (1...3).map { makeFriend("u\($0)") }
        URLProtocolStub.stub(.response(status: 200, body: try listBody(Array(friends.prefix(2)), nextPage: 2)))
        let composer = makeComposer(database, connectivity: nil)
        let pages = try XCTUnwrap(composer.friendPages)

        let first = awaitResult { pages.nextPage(of: .all).load(completion: $0) }
        URLProtocolStub.stub(.response(status: 200, body: try listBody([friends[2]], nextPage: nil)))
        let second = awaitResult { pages.nextPage(of: .all).load(completion: $0) }

        XCTAssertEqual(try first?.get().value?.items.map(\.id), ["u1", "u2"])
        XCTAssertEqual(try second?.get().value?.items.map(\.id), ["u1", "u2", "u3"])
        XCTAssertEqual(try second?.get().value?.hasNextPage, false)
        XCTAssertEqual(
            URLProtocolStub.requests.map { $0.url?.query }, ["page=1&per_page=20", "page=2&per_page=20"])
    }

    func test_aFriendChangedInTheList_showsInThePageThatHoldsIt() throws {
        let database = try seededDatabase()
        let friends = (1...3).map { makeFriend("u\($0)") }
        URLProtocolStub.stub(.response(status: 200, body: try listBody(Array(friends.prefix(2)), nextPage: 2)))
        let composer = makeComposer(database, connectivity: nil)
        let pages = try XCTUnwrap(composer.friendPages)
        XCTAssertNotNil(try awaitResult { pages.nextPage(of: .all).load(completion: $0) }?.get().value)
        XCTAssertEqual(try awaitResult { composer.store.read(.all).load(completion: $0) }?.get().value?.count, 3)

        let renamed = makeFriend("u2", name: "Grace, renamed", updatedAt: 1_700_000_060)
        composer.store.update(.all) { list in list?.applying(.upsert(renamed)) }  // as a live update does

        let page = try awaitResult { pages.store.read(.all, policy: .cacheOnly).load(completion: $0) }?.get().value
        XCTAssertEqual(page?.items.map(\.name), [friends[0].name, "Grace, renamed"])
        XCTAssertEqual(composer.friends.entity("u2"), renamed)
    }

    func test_aFriendAddedOffline_showsAtOnce_survivesARestart_andTakesTheServersIDOnReconnect() throws {
        let database = try seededDatabase()
        let created = makeFriend("n7", name: "Grace")
        URLProtocolStub.stub(.response(status: 201, body: try Friend.makeEncoder().encode(created)), forMethod: "POST")
        let temporary: Friend.ID
        do {
            let composer = makeComposer(database, connectivity: ManualConnectivity(isOnline: false))
            XCTAssertEqual(shown(composer)?.count, 3)
            temporary = try composer.addFriend(named: "Grace")
            XCTAssertTrue(NewFriendChange.isTemporary(temporary))
            XCTAssertEqual(shown(composer)?.map(\.name).last, "Grace", "shown at once, under its temporary id")
            XCTAssertEqual(shown(composer)?.last?.id, temporary)
        }
        XCTAssertEqual(URLProtocolStub.requests.count, 0, "offline: nothing was sent")

        let connectivity = ManualConnectivity(isOnline: false)
        let relaunched = makeComposer(database, connectivity: connectivity)
        XCTAssertEqual(shown(relaunched)?.last?.id, temporary, "the next launch shows it again")
        connectivity.setOnline(true)

        XCTAssertTrue(eventually { relaunched.pendingAdditions?.isMutating == false })
        let posts = URLProtocolStub.requests.filter { $0.httpMethod == "POST" }
        XCTAssertEqual(posts.count, 1)
        XCTAssertNotNil(posts.first?.value(forHTTPHeaderField: "Idempotency-Key"))
        XCTAssertEqual(shown(relaunched)?.map(\.id), ["u1", "u2", "u3", "n7"], "one friend, under the server's id")
        XCTAssertEqual(relaunched.pendingAdditions?.serverID(for: temporary), "n7")
        let saved = try awaitResult { SQLiteFriendsStore(fileURL: database).retrieve(completion: $0) }?.get()
        XCTAssertEqual(saved?.friends.map(\.id), ["u1", "u2", "u3", "n7"], "and the database holds it")
    }

    func test_aFriendAddedAndRemovedOffline_isCreatedThenDeletedUnderTheServersID() throws {
        let database = try seededDatabase()
        let created = makeFriend("n7", name: "Grace")
        URLProtocolStub.stub(.response(status: 201, body: try Friend.makeEncoder().encode(created)), forMethod: "POST")
        URLProtocolStub.stub(.response(status: 204, body: Data()), forMethod: "DELETE")
        let connectivity = ManualConnectivity(isOnline: false)
        let composer = makeComposer(database, connectivity: connectivity)
        XCTAssertEqual(shown(composer)?.count, 3)
        let temporary = try composer.addFriend(named: "Grace")
        composer.deleteFriend(id: temporary)
        XCTAssertEqual(shown(composer)?.map(\.id), ["u1", "u2", "u3"])

        connectivity.setOnline(true)

        XCTAssertTrue(eventually { composer.pendingAdditions?.isMutating == false })
        XCTAssertEqual(
            URLProtocolStub.requests.map { "\($0.httpMethod ?? "") \($0.url?.lastPathComponent ?? "")" },
            ["POST friends", "DELETE n7"])
        XCTAssertEqual(shown(composer)?.map(\.id), ["u1", "u2", "u3"])
    }

    func test_addingAFriend_withoutAWayToCreateIt_throwsASentence() {
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: InMemoryFriendsStore(),
            remote: AnyLoader { completion in
                completion(.success([]))
                return AnyCancellationToken {}
            })
        XCTAssertThrowsError(try composer.addFriend(named: "Grace")) { error in
            XCTAssertTrue(error is FriendsComposer.AdditionUnavailable)
            XCTAssertFalse(error.localizedDescription.contains("error 1"), error.localizedDescription)
        }
    }

    // MARK: Helpers

    private func makeComposer(
        _ database: URL, connectivity: ManualConnectivity?, lifecycle: ManualAppLifecycle? = nil,
        maxAge: Duration? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) -> FriendsComposer {
        let configuration = FriendsComposer.Configuration(
            baseURL: URL(string: "https://api.example.com")!, databaseURL: database, maxAge: maxAge,
            retry: .immediate(maxAttempts: 1), connectivity: connectivity, lifecycle: lifecycle)
        return FriendsComposer(
            configuration: configuration, session: URLProtocolStub.makeSession(), scheduler: TestScheduler(),
            currentDate: now)
    }

    private func seededDatabase() throws -> URL {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let seeded = awaitResult {
            SQLiteFriendsStore(fileURL: url).replaceAll(
                with: (1...3).map { makeFriend("u\($0)") }, timestamp: fixedDate, completion: $0)
        }
        XCTAssertNotNil(try seeded?.get())
        return url
    }

    private func shown(_ composer: FriendsComposer) -> [Friend]? {
        let read = awaitResult { composer.store.read(.all, policy: .cacheOnly).load(completion: $0) }
        return (try? read?.get())?.value
    }

    private func listBody(_ friends: [Friend], nextPage: Int? = nil) throws -> Data {
        var object: [String: Any] = [
            "friends": try JSONSerialization.jsonObject(with: Friend.makeEncoder().encode(friends))
        ]
        if let nextPage { object["next_page"] = nextPage }
        return try JSONSerialization.data(withJSONObject: object)
    }
}
