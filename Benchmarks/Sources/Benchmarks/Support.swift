import Dispatch
import Loading

/// A counter the benchmark's closures add to. `@unchecked Sendable` because every variant runs on one thread at a
/// time and the harness reads it only after the variant returned; a lock here would measure the lock.
final class Tally: @unchecked Sendable {
    var value = 0
}

/// A token with nothing to cancel, that costs no allocation (a synchronous source returns it).
struct NoToken: CancellationToken {
    func cancel() {}
}

struct BenchmarkError: Error {}

/// A loader that completes at once, on the caller's thread.
struct ImmediateLoader: Loader {
    let result: Result<Int, any Error>

    func load(completion: @escaping LoadCompletion<Int>) -> any CancellationToken {
        completion(result)
        return NoToken()
    }
}

/// A cache that adds what it saves to a tally.
struct TallyCache: Cache {
    let tally: Tally

    func save(_ value: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        tally.value &+= value
        completion(.success(()))
    }
}

/// Runs async work to completion from synchronous code (the harness is synchronous).
func blocking<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Task.detached {
        box.value = await work()
        done.signal()
    }
    done.wait()
    return box.value!
}

/// Carries a result out of a Task; written once before a semaphore signal, read once after the wait.
final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
