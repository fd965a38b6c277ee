// The embedded friends API on its own, for `friends-demo --base-url` or any HTTP client:
// swift run --package-path Examples friends-server [--port N]
import Foundation
import FriendsDomain
import FriendsServer

let arguments = CommandLine.arguments
let port = arguments.firstIndex(of: "--port").flatMap { Int(arguments[$0 + 1]) } ?? 0
let names = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra", "Barbara Liskov"]
let friends = names.enumerated().map { index, name in
    Friend(
        id: "u\(index + 1)", name: name, status: [.online, .away, .offline][index % 3],
        updatedAt: Date(timeIntervalSince1970: 1_795_000_000 + Double(index) * 60))
}
do {
    let server = try FriendsAPIServer(friends: friends, latency: .milliseconds(60), port: port)
    // Written straight to the file handle, so that it shows at once even when the output is piped.
    FileHandle.standardOutput.write(
        Data(
            """
            friends API at \(server.baseURL.absoluteString) (GET /friends, DELETE /friends/{id}, GET /friends/events)
            press Ctrl-C to stop

            """.utf8))
    dispatchMain()
} catch {
    FileHandle.standardError.write(Data("friends-server: could not start: \(error)\n".utf8))
    exit(1)
}
