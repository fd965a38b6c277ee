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

/// A source that holds every load until all callers of a batch have called (as a slow network would), then answers
/// each with 1: how the coalescing scenarios count upstream loads.
final class HeldBatchSource: Sendable {
    private let state = Locked<(held: [LoadCompletion<Int>], loads: Int)>(([], 0))

    /// A loader whose loads wait for the end of the batch.
    var loader: AnyLoader<Int> {
        AnyLoader { [state] completion in
            state.withLock { state in
                state.held.append(completion)
                state.loads += 1
            }
            return NoToken()
        }
    }

    /// Starts `count` loads at once with `load`, then answers every held load; returns the values delivered and the
    /// number of loads that reached this source.
    func runBatch(
        _ count: Int,
        _ load: @escaping @Sendable (@escaping LoadCompletion<Int>) -> any CancellationToken
    ) -> (delivered: Int, loads: Int) {
        state.withLock { $0 = ([], 0) }
        let group = DispatchGroup()
        let total = Locked(0)
        let tokens = Locked<[any CancellationToken]>([])
        for _ in 0..<count { group.enter() }
        DispatchQueue.concurrentPerform(iterations: count) { _ in
            let token = load { result in
                total.withLock { $0 += (try? result.get()) ?? 0 }
                group.leave()
            }
            tokens.withLock { $0.append(token) }
        }
        let (completions, loads) = state.withLock { state in
            defer { state.held = [] }
            return (state.held, state.loads)
        }
        DispatchQueue.concurrentPerform(iterations: completions.count) { completions[$0](.success(1)) }
        group.wait()
        withExtendedLifetime(tokens) {}
        return (total.withLock { $0 }, loads)
    }
}

/// A coalescing scenario: `callers` loads at once through `separate` (one upstream load each) and through `shared`
/// (one upstream load for all), both checked every run, timed against each other.
func coalescingScenario(
    title: String,
    callers: Int,
    separate: (name: String, load: @Sendable (@escaping LoadCompletion<Int>) -> any CancellationToken),
    shared: (name: String, load: @Sendable (@escaping LoadCompletion<Int>) -> any CancellationToken),
    source: HeldBatchSource
) -> Scenario {
    let perCall = Variant(name: separate.name) { count in
        let (delivered, loads) = source.runBatch(count, separate.load)
        precondition(loads == count, "one upstream load per call expected, performed \(loads)")
        return delivered
    }
    let coalesced = Variant(name: shared.name) { count in
        let (delivered, loads) = source.runBatch(count, shared.load)
        precondition(loads == 1, "coalescing must perform exactly one upstream load, performed \(loads)")
        return delivered
    }
    return Scenario(
        title: title, unit: "batches of callers", operations: 1, reference: separate.name,
        variants: [perCall, coalesced],
        expectedChecksum: { _ in callers },
        note: "upstream loads per batch: \(Report.count(callers)) without coalescing, 1 with it (checked every run)"
    )
    .withOperations(callers)
}
