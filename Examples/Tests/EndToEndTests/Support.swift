import Foundation
import FriendsDomain
import FriendsServer
import Loading
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func sampleFriends(_ count: Int = 3) -> [Friend] {
    (1...count).map { index in
        Friend(
            id: "u\(index)", name: "Friend \(index)", status: index.isMultiple(of: 2) ? .offline : .online,
            avatarURL: URL(string: "https://avatars.example/\(index).png"),
            updatedAt: Date(timeIntervalSince1970: 1_795_000_000 + Double(index)))
    }
}

/// A fresh folder with a database path in it, removed after the test.
func makeDatabaseURL(for test: XCTestCase) -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
    return folder.appendingPathComponent("friends.sqlite")
}

/// A server stopped when the test ends, even if it fails.
func makeServer(for test: XCTestCase, friends: [Friend] = sampleFriends(), latency: Duration = .milliseconds(5)) throws
    -> FriendsAPIServer
{
    let server = try FriendsAPIServer(friends: friends, latency: latency)
    test.addTeardownBlock { server.stop() }
    return server
}

/// A session that does not reuse connections between tests.
func makeSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 10
    return URLSession(configuration: configuration)
}

extension TimeInterval {
    /// How long a test waits for what must happen before it calls it a hang: a watchdog, never a measure of speed.
    static let watchdog: TimeInterval = 60
}

extension XCTestCase {
    /// Loads once, waiting on the main queue (composers deliver there).
    func load(_ loader: some Loader<[Friend]>, timeout: Double = .watchdog) -> Result<[Friend], any Error>? {
        let done = expectation(description: "loaded")
        let box = Locked<Result<[Friend], any Error>?>(nil)
        loader.load { result in
            box.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: timeout)
        return box.withLock { $0 }
    }

    func storedFriends(at url: URL) -> [Friend]? {
        let store = SQLiteFriendsStore(fileURL: url)
        let done = expectation(description: "read")
        let box = Locked<[Friend]?>(nil)
        store.retrieve { result in
            box.withLock { $0 = (try? result.get())??.friends }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return box.withLock { $0 }
    }

    func waitUntil(
        timeout: Double = .watchdog, _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
    ) {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() && Date() < deadline { RunLoop.current.run(until: Date().addingTimeInterval(0.01)) }
        XCTAssertTrue(
            condition(), "the condition did not hold within \(Int(timeout)) s (a watchdog)", file: file, line: line)
    }
}
