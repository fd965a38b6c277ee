import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the user saw survives the process being killed: a child process (this test binary, run on
/// ``ProcessKillChild``) loads or deletes friends through the production composition on a real SQLite file, says so,
/// and is killed with SIGKILL at that moment; the next launch reads the file.
final class ProcessKillTests: XCTestCase {
    func test_aNetworkLoad_isInTheDatabaseOnceShown_evenWhenTheProcessIsKilledThen() throws {
        let database = try makeDatabaseURL()

        let said = try runChildUntilKilled(.load, database: database)

        XCTAssertEqual(said, "shown 500")
        let saved = try awaitResult { SQLiteFriendsStore(fileURL: database).retrieve(completion: $0) }?.get()
        XCTAssertEqual(saved?.friends.count, 500, "the next launch finds what was shown")
    }

    func test_aConfirmedOptimisticDelete_isInTheDatabaseOnceReported_evenWhenTheProcessIsKilledThen() throws {
        try assertDeleteSurvivesKill(.deleteOptimistic)
    }

    func test_aConfirmedNonOptimisticDelete_isInTheDatabaseOnceReported_evenWhenTheProcessIsKilledThen() throws {
        try assertDeleteSurvivesKill(.deleteNonOptimistic)
    }

    // MARK: - Helpers

    private func assertDeleteSurvivesKill(
        _ scenario: ProcessKillChild.Scenario, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let database = try makeDatabaseURL()
        let seeded = awaitResult {
            SQLiteFriendsStore(fileURL: database).replaceAll(
                with: ProcessKillChild.friends, timestamp: Date(), completion: $0)
        }
        XCTAssertNotNil(try seeded?.get(), file: file, line: line)

        let said = try runChildUntilKilled(scenario, database: database)

        XCTAssertEqual(said, "deleted u0", file: file, line: line)
        let saved = try awaitResult { SQLiteFriendsStore(fileURL: database).retrieve(completion: $0) }?.get()
        XCTAssertEqual(saved?.friends.count, 499, "the confirmed delete is on disk", file: file, line: line)
        XCTAssertFalse(saved?.friends.contains { $0.id == "u0" } ?? true, file: file, line: line)
    }

    private func makeDatabaseURL() throws -> URL {
        let url = temporaryFileURL()
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        return url
    }

    /// Runs the child on `scenario`, kills it with SIGKILL as soon as it says its report, and returns the report.
    private func runChildUntilKilled(_ scenario: ProcessKillChild.Scenario, database: URL) throws -> String? {
        try runChildUntilKilled(
            "ProcessKillChild/test_runsTheScenarioItIsGiven",
            environment: [
                ProcessKillChild.scenarioVariable: scenario.rawValue, ProcessKillChild.databaseVariable: database.path,
            ])
    }
}

/// The child side of ``ProcessKillTests``: skipped unless run by it, with a scenario and a database file.
final class ProcessKillChild: XCTestCase {
    enum Scenario: String {
        case load, deleteOptimistic, deleteNonOptimistic
    }

    static let scenarioVariable = "FRIENDS_KILL_SCENARIO"
    static let databaseVariable = "FRIENDS_KILL_DATABASE"
    static let friends = (0..<500).map { makeFriend("u\($0)", name: "Friend \($0)") }

    func test_runsTheScenarioItIsGiven() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let name = environment[Self.scenarioVariable], let scenario = Scenario(rawValue: name),
            let path = environment[Self.databaseVariable]
        else { throw XCTSkip("the child process of ProcessKillTests: it runs only when that test starts it") }
        URLProtocolStub.reset()
        let configuration = FriendsComposer.Configuration(
            baseURL: URL(string: "https://api.example.com")!, databaseURL: URL(fileURLWithPath: path))
        switch scenario {
        case .load:
            let body = try JSONSerialization.data(withJSONObject: [
                "friends": try JSONSerialization.jsonObject(with: Friend.makeEncoder().encode(Self.friends))
            ])
            URLProtocolStub.stub(.response(status: 200, body: body))
            let composer = FriendsComposer(configuration: configuration, session: URLProtocolStub.makeSession())
            let shown = try XCTUnwrap(awaitMain { composer.friendsLoader.load(completion: $0) }).get()
            sayKillNow("shown \(shown.count)")
        case .deleteOptimistic, .deleteNonOptimistic:
            URLProtocolStub.stub(.response(status: 204, body: Data()))
            let composer = FriendsComposer(configuration: configuration, session: URLProtocolStub.makeSession())
            let repository = FriendsRepository(composer: composer, scheduler: ImmediateScheduler.immediate)
            let loaded = try XCTUnwrap(awaitMain { composer.friendsLoader.load(completion: $0) }).get()
            XCTAssertEqual(loaded.count, 500, "read from the database")
            let optimistic = scenario == .deleteOptimistic
            try XCTUnwrap(awaitMain { repository.remove(id: "u0", optimistic: optimistic, completion: $0) }).get()
            sayKillNow("deleted u0")
        }
        waitToBeKilled()
    }

    /// Waits for a completion that may be delivered on the main queue (this runs on the main thread).
    private func awaitMain<T: Sendable>(
        _ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
    ) -> Result<T, any Error>? {
        let box = Locked<Result<T, any Error>?>(nil)
        let done = expectation(description: "done")
        start { result in
            box.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return box.withLock { $0 }
    }
}
