// Retry with exponential backoff, and a timeout that cancels a slow load.
// Run: swift run --package-path Examples example-retry-timeout
import Dispatch
import Foundation
import Loading

struct ServerError: Error {}

// A flaky server: fails twice, then answers.
let attempts = Locked(0)
let started = Date()
let flaky = AnyLoader<String> { completion in
    let attempt = attempts.withLock {
        $0 += 1
        return $0
    }
    print(String(format: "  attempt %d at %4.0f ms", attempt, Date().timeIntervalSince(started) * 1000))
    completion(attempt < 3 ? .failure(ServerError()) : .success("friends"))
    return AnyCancellationToken {}
}

let retried = flaky.retry(.exponential(initial: .milliseconds(100), maxDelay: .seconds(1), maxAttempts: 4))
print("Retry with backoff (100 ms, then 200 ms):")
print("  -> \(try await retried.load())")

// A slow source: the timeout fails the load and cancels the work.
let slow = AnyLoader<String> {
    try await Task.sleep(for: .seconds(5))
    return "too late"
}
print("Timeout after 200 ms:")
do {
    _ = try await slow.timeout(after: .milliseconds(200), scheduler: .global()).load()
} catch {
    print("  -> \(error)")
}

// Only some errors are worth retrying.
struct NotFound: Error {}
let missing = AnyLoader<String> { completion in
    print("  asked once")
    completion(.failure(NotFound()))
    return AnyCancellationToken {}
}
print("No retry for errors the policy rejects:")
do {
    _ = try await missing.retry(RetryPolicy.immediate(maxAttempts: 5).retrying { !($0 is NotFound) }).load()
} catch {
    print("  -> \(type(of: error))")
}
