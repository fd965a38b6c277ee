// Fallback and caching with callbacks: memory, else a database (cached to memory), else the network (cached to
// both). Run: swift run --package-path Examples example-fallback-caching
import Dispatch
import Loading

/// One list kept in memory, printing what happens to it: a source (Loader) and a destination (Cache).
final class ListSlot: Loader, Cache {
    let name: String
    private let value = Locked<[String]?>(nil)
    init(_ name: String) { self.name = name }

    func load(completion: @escaping LoadCompletion<[String]>) -> any CancellationToken {
        let stored = value.withLock { $0 }
        print("  \(name): \(stored == nil ? "miss" : "hit")")
        completion(stored.map { .success($0) } ?? .failure(Miss()))
        return AnyCancellationToken {}
    }

    func save(_ friends: [String], completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        value.withLock { $0 = friends }
        print("  \(name): saved \(friends.count) friends")
        completion(.success(()))
    }

    struct Miss: Error {}
}

let memory = ListSlot("memory")
let database = ListSlot("database")
let network = AnyLoader<[String]> { completion in
    print("  network: GET /friends")
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
        completion(.success(["Ada", "Grace", "Alan"]))
    }
    return AnyCancellationToken {}
}

let friends =
    memory
    .fallback(to: database.caching(to: memory))
    .fallback(to: network.caching(to: database).caching(to: memory))

func load(_ title: String) {
    print(title)
    let done = DispatchSemaphore(value: 0)
    friends.load { result in
        print("  -> \((try? result.get())?.joined(separator: ", ") ?? "failed")")
        done.signal()
    }
    done.wait()
}

load("First load (cold):")
load("Second load (warm):")
