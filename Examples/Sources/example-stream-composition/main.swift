// The everyday composition written with the stream core: memory, else the database (cached to memory), else the
// network (cached to both), merged with live updates that replace a friend by id, delivered on the main queue.
// Run: swift run --package-path Examples example-stream-composition
import Dispatch
import Foundation
import Loading

struct Friend: Sendable, Equatable, CustomStringConvertible {
    let id: Int
    var name: String
    var description: String { name }
}

/// One list kept in memory: a source (Loader) and a destination (Cache).
final class ListSlot: Loader, Cache {
    private let value = Locked<[Friend]?>(nil)
    func load(completion: @escaping LoadCompletion<[Friend]>) -> any CancellationToken {
        completion(value.withLock { $0 }.map { .success($0) } ?? .failure(Empty()))
        return AnyCancellationToken {}
    }
    func save(_ friends: [Friend], completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        value.withLock { $0 = friends }
        completion(.success(()))
    }
    struct Empty: Error {}
}

let memory = ListSlot()
let database = ListSlot()
let network = AnyLoader { [Friend(id: 1, name: "Ada"), Friend(id: 2, name: "Grace")] }
let updates = StreamSubject<Friend, Never>()  // a WebSocket or server-sent events in an app

let friends = memory.asStream()
    .fallback(to: database.asStream().caching(to: memory))
    .fallback(to: network.asStream().caching(to: database).caching(to: memory))
    .merge(
        with: updates.stream
            .setFailureType(to: (any Error).self)
            .flatMap { friend in memory.asStream().map { list in list.map { $0.id == friend.id ? friend : $0 } } }
            .caching(to: memory)
            .caching(to: database)
    )
    .receive(on: .main)

let received = Locked(0)
let subscription = friends.sink {
    print("completion: \($0)")
} receiveValue: { list in
    print("on main: \(list)")
    if received.withLock({
        $0 += 1
        return $0
    }) == 3 {
        exit(0)
    }
}
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
    updates.send(Friend(id: 2, name: "Grace Hopper"))
    updates.send(Friend(id: 1, name: "Ada Lovelace"))
}
dispatchMain()  // a command-line program must run the main queue itself
