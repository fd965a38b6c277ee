import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Every live update a screen was shown reaches the database within the debounce, whenever it arrives: also while the
/// first read of a large list from the database is still running (held until the updates were sent), and the network
/// is down.
final class LiveUpdatesDuringReadTests: XCTestCase {
    /// A large list: 5,000 friends (LOADING_TEST_SCALE scales it).
    private let everyone = (0..<scaled(5_000, floor: 100)).map { makeFriend("f\($0)") }
    /// What the list is after 50 upserts of new friends and 50 removals from its top.
    private var expected: Set<Friend.ID> {
        Set(everyone.dropFirst(50).map(\.id) + (0..<50).map { "new\($0)" })
    }

    func test_updatesArrivingThroughTheStreamWhileTheDatabaseIsRead_reachTheDatabaseWithinTheDebounce() throws {
        let database = try makeDatabase()
        let reads = SlowStore(wrapping: database)
        let updates = UpdatesDouble()
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: reads,
            remote: AnyLoader { throw URLError(.notConnectedToInternet) }, updates: updates,
            saveDebounce: .milliseconds(50), scheduler: .global())
        let shown = Locked<Set<Friend.ID>>([])
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            shown.withLock { $0 = Set(list.map(\.id)) }
        }
        // While the database reads its rows: 50 new friends, and 50 removed.
        XCTAssertTrue(eventually { reads.heldReads > 0 }, "the database is read")
        for index in 0..<50 {
            updates.send(.upsert(makeFriend("new\(index)")))
            updates.send(.remove(id: "f\(index)"))
        }
        reads.stopHoldingReads()

        spinMainQueue { shown.withLock { $0 } == expected }
        XCTAssertEqual(shown.withLock { $0 }, expected, "every change is shown")
        assertDatabaseHoldsWhatIsShown(database)
        subscription.cancel()
    }

    func test_updatesSentToTheStoreWhileItsFirstReadRuns_reachTheDatabaseWithinTheDebounce() throws {
        let database = try makeDatabase()
        let reads = SlowStore(wrapping: database)
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: reads,
            remote: AnyLoader { throw URLError(.notConnectedToInternet) }, saveDebounce: .milliseconds(50),
            scheduler: .global())
        let shown = Locked<Set<Friend.ID>>([])
        let subscription = composer.store.changes(for: .all).sink { response in
            shown.withLock { $0 = Set((response.value ?? []).map(\.id)) }
        }
        _ = composer.store.read(.all, policy: composer.listPolicy).load { _ in }
        XCTAssertTrue(eventually { reads.heldReads > 0 }, "the database is read")
        for index in 0..<50 {
            composer.store.update(.all) { $0?.applying(.upsert(makeFriend("new\(index)"))) }
            composer.store.update(.all) { $0?.applying(.remove(id: "f\(index)")) }
        }
        reads.stopHoldingReads()

        XCTAssertTrue(eventually { shown.withLock { $0 } == expected }, "every change is shown")
        assertDatabaseHoldsWhatIsShown(database)
        subscription.cancel()
    }

    // MARK: Helpers

    /// The database comes to hold the shown list with no further change asked: the debounce (50 ms), then a save.
    /// Not a timing check: a save and a read of thousands of rows take seconds under the thread sanitizer.
    private func assertDatabaseHoldsWhatIsShown(
        _ database: SQLiteFriendsStore, file: StaticString = #filePath, line: UInt = #line
    ) {
        let rows = Locked<Set<Friend.ID>>([])
        let holds = eventually {
            let saved = awaitResult(timeout: .watchdog) { database.retrieve(completion: $0) }
            rows.withLock { $0 = Set((try? saved?.get()?.friends ?? [])?.map(\.id) ?? []) }
            return rows.withLock { $0 } == expected
        }
        let saved = rows.withLock { $0 }
        XCTAssertTrue(
            holds,
            "the database lacks \(expected.subtracting(saved).count) shown friends and still holds "
                + "\(saved.subtracting(expected).count) removed ones", file: file, line: line)
    }

    private func makeDatabase() throws -> SQLiteFriendsStore {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("friends-\(UUID().uuidString).sqlite")
        addTeardownBlock { try? FileManager.default.removeItem(at: file) }
        let database = SQLiteFriendsStore(fileURL: file)
        let saved = awaitResult(timeout: .watchdog) {
            database.replaceAll(with: everyone, timestamp: Date(), completion: $0)
        }
        XCTAssertNoThrow(try saved?.get())
        return database
    }

}
