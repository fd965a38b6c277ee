import Dispatch
import Foundation
import FriendsDomain
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The story's kill step: a child process (this program, with `--child-load PATH`) loads the friends list through
/// the production composition and prints how many it shows; the parent kills it with SIGKILL as soon as it reads
/// that line. Whatever was shown must be in the database by then.
enum KillStep {
    static let marker = "shown: "

    struct ChildFailed: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs the child, kills it once it has shown the list, and returns how many friends it showed.
    static func loadInChildThenKill(baseURL: URL, databaseURL: URL) async throws -> Int {
        let child = try ChildProcess(arguments: [
            "--base-url", baseURL.absoluteString, "--child-load", databaseURL.path,
        ])
        let line = await child.line { $0.hasPrefix(marker) }?.line
        child.kill()  // at once: what is not on disk now is lost
        guard let line, let count = Int(line.dropFirst(marker.count)) else {
            throw ChildFailed(description: "the child ended without showing the list")
        }
        return count
    }

    /// The child's side: loads, prints the marker line, and waits to be killed (exits 1 after three minutes, when its
    /// parent is gone).
    static func runChild(baseURL: URL, databaseURL: URL) async -> Never {
        let composer = FriendsComposer(configuration: .init(baseURL: baseURL, databaseURL: databaseURL))
        guard let friends = try? await composer.friendsLoader.load() else { exit(1) }
        FileHandle.standardOutput.write(Data("\(marker)\(friends.count)\n".utf8))
        try? await Task.sleep(for: .seconds(180))
        exit(1)
    }
}
