import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Two compositions over one database file (an app and its extension, or two processes): each saves its own
/// changes, row by row, and neither undoes what the other confirmed.
final class SharedDatabaseTests: XCTestCase {
    private let friends = (0..<3).map { makeFriend("u\($0)", name: "Friend \($0)") }

    func test_aConfirmedDeleteByOne_isNotUndoneByTheOthersSaveOfALiveUpdate() throws {
        let url = try makeDatabaseURL()
        let a = try makeLoadedSide(url)
        let b = try makeLoadedSide(url)
        let stream = b.composer.friendsStream().sink { _ in
        } receiveValue: { _ in
        }

        a.network.answer(with: Array(friends.dropFirst()))  // what the server has after the delete
        let deleted = expectation(description: "deleted")
        a.repository.remove(id: "u0", optimistic: false) { _ in deleted.fulfill() }
        a.deleter.complete(id: "u0", with: .success(()))
        wait(for: [deleted], timeout: .watchdog)
        let renamed = makeFriend("u1", name: "Renamed by B")
        b.updates.send(.upsert(renamed))  // B still shows u0: it never read the file again
        let flushed = expectation(description: "flushed")
        b.composer.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)

        let saved = try awaitResult { SQLiteFriendsStore(fileURL: url).retrieve(completion: $0) }?.get()?.friends
        XCTAssertEqual(saved, [renamed, friends[2]], "A's delete and B's update are both kept")
        stream.cancel()
    }

    func test_aLiveUpdateByOne_isNotUndoneByTheOthersConfirmedDelete() throws {
        let url = try makeDatabaseURL()
        let a = try makeLoadedSide(url)
        let b = try makeLoadedSide(url)
        let stream = b.composer.friendsStream().sink { _ in
        } receiveValue: { _ in
        }
        let renamed = makeFriend("u2", name: "Renamed by B")
        b.updates.send(.upsert(renamed))
        let flushed = expectation(description: "flushed")
        b.composer.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)

        a.network.hold()  // the follow-up refresh does not answer: what A saves is its delete alone
        let deleted = expectation(description: "deleted")
        a.repository.remove(id: "u0", optimistic: true) { _ in deleted.fulfill() }
        a.deleter.complete(id: "u0", with: .success(()))
        wait(for: [deleted], timeout: .watchdog)

        let saved = try awaitResult { SQLiteFriendsStore(fileURL: url).retrieve(completion: $0) }?.get()?.friends
        XCTAssertEqual(saved, [friends[1], renamed])
        stream.cancel()
    }

    func test_withAChangeJournal_theOtherSideShowsAConfirmedDeleteThenALogout_withoutFetching() throws {
        let url = try makeDatabaseURL()
        let journal = url.deletingLastPathComponent().appendingPathComponent("friends.journal")
        let app = try makeLoadedSide(url, journal: journal)
        let widget = try makeLoadedSide(url, journal: journal)
        let shown = Locked<[[Friend]]>([])
        let stream = widget.composer.friendsStream().sink { _ in
        } receiveValue: { list in
            shown.withLock { $0.append(list) }
        }
        let friends = friends
        waitUntil { shown.withLock { $0.last } == friends }
        let widgetRequests = widget.network.requestCount

        app.network.answer(with: Array(friends.dropFirst()))  // what the server has after the delete
        let deleted = expectation(description: "deleted")
        app.repository.remove(id: "u0", optimistic: false) { _ in deleted.fulfill() }
        app.deleter.complete(id: "u0", with: .success(()))
        wait(for: [deleted], timeout: .watchdog)
        let deleteShown = waitUntil { shown.withLock { $0.last } == Array(friends.dropFirst()) }

        let wiped = expectation(description: "wiped")
        app.repository.wipe { wiped.fulfill() }
        wait(for: [wiped], timeout: .watchdog)
        let logoutShown = waitUntil { shown.withLock { $0.last } == [] }

        print("the widget showed the app's delete \(deleteShown) and its logout \(logoutShown) after they ended")
        XCTAssertEqual(widget.network.requestCount, widgetRequests, "the widget learns from the database, not the API")

        // The next user's list, loaded in the app: once the widget shows it, it learnt everything before it.
        let nextUser = [makeFriend("n1", name: "Next user's friend")]
        app.network.answer(with: nextUser)
        app.repository.load()
        waitUntil { shown.withLock { $0.last } == nextUser }
        let afterTheLogout = shown.withLock { $0 }.drop { $0 != [] }
        XCTAssertEqual(
            Set(afterTheLogout), [[], nextUser], "nothing of the old user came back: \(Array(afterTheLogout))")
        stream.cancel()
    }

    func test_changes_nameOnlyWhatChanged() {
        let (ada, grace, linus) = (makeFriend("a"), makeFriend("g"), makeFriend("l"))

        // Sample: begin
        let changes = FriendsChanges(from: [ada, grace], to: [grace, linus])
        // deletions: Ada's id; upserts: Linus (new, last); nothing moves
        // Sample: end

        XCTAssertEqual(changes.deletions, ["a"])
        XCTAssertEqual(changes.upserts, [.init(friend: linus, position: 1)])
        XCTAssertEqual(changes.moves, [], "Grace keeps her place among the others")
        XCTAssertTrue(changes.keepsOrder)
        XCTAssertFalse(changes.replacesAll)
        let reordered = FriendsChanges(from: [ada, grace], to: [grace, ada])
        XCTAssertFalse(reordered.keepsOrder)
        XCTAssertEqual(reordered.moves, [.init(friend: grace, position: 0), .init(friend: ada, position: 1)])
        XCTAssertTrue(FriendsChanges(from: nil, to: [ada]).replacesAll, "nothing known before: replace all")
    }

    // MARK: - Helpers

    private struct Side {
        let composer: FriendsComposer
        let repository: FriendsRepository
        let network: ControllableNetwork
        let deleter: DeleterSpy
        let updates: UpdatesDouble
    }

    private func makeLoadedSide(_ url: URL, journal: URL? = nil) throws -> Side {
        let network = ControllableNetwork()
        let deleter = DeleterSpy()
        let updates = UpdatesDouble()
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore(fileURL: url),
            remote: network.eraseToAnyLoader(), updates: updates,
            sharing: try journal.map { try .journal(at: $0, sharedLevel: "database", polling: .milliseconds(20)) },
            scheduler: TestScheduler())
        let repository = FriendsRepository(
            store: composer.store, deleter: deleter, scheduler: ImmediateScheduler.immediate)
        let loaded = expectation(description: "loaded")
        let result = Locked<[Friend]?>(nil)
        composer.friendsLoader.load { outcome in
            result.withLock { $0 = try? outcome.get() }
            loaded.fulfill()
        }
        wait(for: [loaded], timeout: .watchdog)
        XCTAssertEqual(result.withLock { $0 }, friends, "read from the file")
        return Side(composer: composer, repository: repository, network: network, deleter: deleter, updates: updates)
    }

    /// Runs the main queue until `condition` holds (the stream delivers there); how long that took.
    @discardableResult
    private func waitUntil(_ condition: @escaping @Sendable () -> Bool) -> Duration {
        let start = ContinuousClock.now
        spinMainQueue(until: condition)
        return ContinuousClock.now - start
    }

    private func makeDatabaseURL() throws -> URL {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let seeded = awaitResult {
            SQLiteFriendsStore(fileURL: url).replaceAll(with: friends, timestamp: Date(), completion: $0)
        }
        XCTAssertNotNil(try seeded?.get())
        return url
    }
}
