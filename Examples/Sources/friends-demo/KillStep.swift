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
        let child = Process()
        #if os(Linux)
            child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
            child.executableURL = Bundle.main.executableURL
        #endif
        child.arguments = ["--base-url", baseURL.absoluteString, "--child-load", databaseURL.path]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        let line = await readLine(output, startingWith: marker)
        kill(child.processIdentifier, SIGKILL)  // at once: what is not on disk now is lost
        child.waitUntilExit()
        guard let line, let count = Int(line.dropFirst(marker.count)) else {
            throw ChildFailed(description: "the child ended without showing the list")
        }
        return count
    }

    /// The child's side: loads, prints the marker line, and waits to be killed (exits 1 after 30 s).
    static func runChild(baseURL: URL, databaseURL: URL) async -> Never {
        let composer = FriendsComposer(configuration: .init(baseURL: baseURL, databaseURL: databaseURL))
        guard let friends = try? await composer.friendsLoader.load() else { exit(1) }
        FileHandle.standardOutput.write(Data("\(marker)\(friends.count)\n".utf8))
        try? await Task.sleep(for: .seconds(30))
        exit(1)
    }

    /// The first line of `pipe` that starts with `prefix`; `nil` when the pipe ends first. Read off the
    /// cooperative pool: the reads block.
    private static func readLine(_ pipe: Pipe, startingWith prefix: String) async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var text = ""
                while true {
                    let data = pipe.fileHandleForReading.availableData
                    if data.isEmpty { return continuation.resume(returning: nil) }
                    text += String(decoding: data, as: UTF8.self)
                    if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                        return continuation.resume(returning: String(line))
                    }
                }
            }
        }
    }
}
