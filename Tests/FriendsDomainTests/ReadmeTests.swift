import Foundation
import FriendsDomain
import Loading
import XCTest

/// The README's FriendsDomain snippet, compiled as written (the loads are cancelled at once: no network here).
final class ReadmeTests: XCTestCase {
    func test_readmeComposerSnippetBuilds() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let databasePath = directory.appendingPathComponent("friends.sqlite").path

        // README: begin
        let composer = FriendsComposer(configuration: .init(
            baseURL: URL(string: "https://api.example.com/v1")!,
            databaseURL: URL(fileURLWithPath: databasePath),
            maxAge: .seconds(300),
            retry: .exponential(initial: .milliseconds(200), maxDelay: .seconds(2), maxAttempts: 3),
            timeout: .seconds(10),
            saveDebounce: .milliseconds(500)))

        let token = composer.friendsLoader.load { _ in XCTFail("cancelled loads never complete") }
        let live = composer.friendsStream().sink(receiveCompletion: { _ in }) { _ in }
        // README: end

        token.cancel()
        live.cancel()
        XCTAssertFalse(live.isActive)
        RunLoop.current.run(until: Date().addingTimeInterval(0.05))
    }
}
