import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The production composition on a real SQLite file: what one composer loads from the network, a second one (as
/// after an app restart) loads from the file while the network is down.
final class FriendsComposerIntegrationTests: XCTestCase {
    func test_secondComposerLoadsFromTheDatabaseFileWhileTheNetworkFails() throws {
        URLProtocolStub.reset()
        let databaseURL = temporaryFileURL()
        try FileManager.default.createDirectory(
            at: databaseURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: databaseURL.deletingLastPathComponent()) }
        let configuration = FriendsComposer.Configuration(
            baseURL: URL(string: "https://api.example.com")!, databaseURL: databaseURL,
            retry: .immediate(maxAttempts: 2))
        let friends = [makeFriend("u1"), makeFriend("u2", status: .offline)]
        let body = try JSONSerialization.data(withJSONObject: [
            "friends": try JSONSerialization.jsonObject(with: Friend.makeEncoder().encode(friends))
        ])

        URLProtocolStub.stub(.response(status: 200, body: body))
        let first = FriendsComposer(configuration: configuration, session: URLProtocolStub.makeSession())
        XCTAssertEqual(try load(first.friendsLoader).get(), friends)
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
        // What the network brought is saved before it is delivered.
        let saved = try awaitResult { SQLiteFriendsStore(fileURL: databaseURL).retrieve(completion: $0) }?.get()
        XCTAssertEqual(saved?.friends, friends)

        URLProtocolStub.stub(.failure(.cannotConnectToHost))
        let events = EventLog()
        let second = FriendsComposer(
            configuration: configuration, session: URLProtocolStub.makeSession(), onEvent: events.record)
        XCTAssertEqual(try load(second.friendsLoader).get(), friends)
        XCTAssertEqual(events.started, [.memory, .database], "the restarted app reads the file, not the network")
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
    }

    func test_networkFailureOnFirstLaunch_retriesThenDeliversConnectivityError() throws {
        URLProtocolStub.reset()
        URLProtocolStub.stub(.failure(.cannotConnectToHost))
        let databaseURL = temporaryFileURL()
        try FileManager.default.createDirectory(
            at: databaseURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: databaseURL.deletingLastPathComponent()) }
        let sut = FriendsComposer(
            configuration: .init(
                baseURL: URL(string: "https://api.example.com")!, databaseURL: databaseURL,
                retry: .exponential(initial: .milliseconds(10), maxAttempts: 3)),
            session: URLProtocolStub.makeSession())

        guard case .failure(FriendsAPIError.connectivity) = load(sut.friendsLoader) else {
            return XCTFail("expected a connectivity error")
        }
        XCTAssertEqual(URLProtocolStub.requests.count, 3)
    }

    private func load(_ loader: AnyLoader<[Friend]>) -> Result<[Friend], any Error> {
        let done = expectation(description: "loaded")
        let box = Locked<Result<[Friend], any Error>?>(nil)
        loader.load { result in
            box.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return box.withLock { $0 } ?? .failure(AnyError())
    }
}
