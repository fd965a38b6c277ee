// Merging a live source into a loaded list, over real HTTP: the embedded friends API streams server-sent events;
// FriendsComposer loads the list, then applies each update by id and caches it.
// Run: swift run --package-path Examples example-live-merge
import Foundation
import FriendsDomain
import FriendsServer
import Loading

let start = Date(timeIntervalSince1970: 1_795_000_000)
let server = try FriendsAPIServer(friends: [
    Friend(id: "u1", name: "Ada", status: .online, updatedAt: start),
    Friend(id: "u2", name: "Grace", status: .away, updatedAt: start),
])
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-merge-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let composer = FriendsComposer(
    configuration: .init(
        baseURL: server.baseURL, databaseURL: folder.appendingPathComponent("friends.sqlite"),
        saveDebounce: .milliseconds(200)))

let lists = Locked(0)
let subscription = composer.friendsStream().sink {
    print("ended: \($0)")
} receiveValue: { friends in
    let line = friends.map { "\($0.name) (\($0.status.rawValue))" }.joined(separator: ", ")
    let number = lists.withLock { count -> Int in
        count += 1
        return count
    }
    print("list #\(number): \(line)")
}

func waitFor(_ condition: @Sendable () -> Bool) async {
    while !condition() { try? await Task.sleep(for: .milliseconds(10)) }
}
await waitFor { lists.withLock { $0 } == 1 && server.openEventStreams == 1 }
server.push(.upsert(Friend(id: "u2", name: "Grace", status: .online, updatedAt: start + 60)))
server.push(.upsert(Friend(id: "u3", name: "Alan", status: .online, updatedAt: start + 61)))
server.push(.remove(id: "u1"))
await waitFor { lists.withLock { $0 } == 4 }
subscription.cancel()
server.stop()
