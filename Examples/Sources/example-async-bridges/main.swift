// async/await bridges both ways: loaders from async code, async code from loaders and streams, and cancellation
// crossing the bridge. Run: swift run --package-path Examples example-async-bridges
import Dispatch
import Loading

// async -> loader: an async function becomes a composable loader.
func fetchFriends() async throws -> [String] {
    try await Task.sleep(for: .milliseconds(20))
    return ["Ada", "Grace"]
}
let remote = AnyLoader { try await fetchFriends() }

// loader -> async: any loader, however composed, can be awaited.
let composed = remote.map { $0.map { $0.uppercased() } }
print("awaited loader:", try await composed.load())

// Cancelling the awaiting Task cancels the load (the async closure's Task sees it).
let slow = AnyLoader<String> {
    do {
        try await Task.sleep(for: .seconds(10))
        return "finished"
    } catch {
        print("  the slow work saw its cancellation")
        throw error
    }
}
let waiting = Task { try await slow.load() }
try await Task.sleep(for: .milliseconds(50))
waiting.cancel()
print("cancelled load:", await waiting.result)

// async -> stream: a Task per subscription, cancelled with it.
let session = EventStream.task { try await fetchFriends().count }
print("stream value:", try await session.value)

// stream -> async sequence: for-await over values; leaving the loop cancels the subscription.
let ticks = StreamSubject<Int, Never>()
let reader = Task {
    var seen: [Int] = []
    for await tick in ticks.stream.values {
        seen.append(tick)
        if seen.count == 3 { break }
    }
    return seen
}
try await Task.sleep(for: .milliseconds(20))
for tick in 1...5 { ticks.send(tick) }
print("for await:", await reader.value)
