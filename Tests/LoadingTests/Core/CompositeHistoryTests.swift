import Loading
import LoadingTestSupport
import XCTest

/// The loads' contract over random compositions and random orders of what happens to them: composites nested up to
/// three deep over spies, a test scheduler's clock, upstream answers and cache saves in any order, and a cancel at any
/// moment. Whatever happens, a load completes at most once and never after its cancel returned, completes exactly
/// once when nothing cancels it and its sources answer, and keeps nothing alive once it completed or was cancelled.
final class CompositeHistoryTests: XCTestCase {
    private struct Failure: Error {}

    /// What a history drives: the spies a composition loads from, the caches it saves to, and the clock.
    private final class Sources {
        var spies: [LoaderSpy<Int>] = []
        var caches: [CacheSpy<Int>] = []
        /// The saves of each cache (by its place in `caches`) the history completed.
        var completedSaves: [Set<Int>] = []
        let scheduler = TestScheduler()

        /// The saves of the cache at `index` still waiting.
        func pendingSaves(ofCache index: Int) -> [Int] {
            (0..<caches[index].savedValues.count).filter { !completedSaves[index].contains($0) }
        }

        /// Whether any source still has work the history can make progress with.
        var hasWork: Bool {
            spies.contains { !$0.pendingRequests.isEmpty }
                || caches.indices.contains { !pendingSaves(ofCache: $0).isEmpty }
                || scheduler.pendingCount > 0
        }
    }

    func test_randomCompositionsAndHistories_keepTheLoadContract() {
        for seed in UInt64(1)...1_500 {
            var random = SeededRandom(seed: seed)
            let sources = Sources()
            let loader = composition(depth: Int.random(in: 1...3, using: &random), sources, &random)
            let completions = Locked(0)
            weak var watched: LeakMarker?
            var token: (any CancellationToken)?
            do {
                let marker = LeakMarker()
                watched = marker
                token = loader.loader.load { _ in
                    marker.touch()
                    completions.withLock { $0 += 1 }
                }
            }
            var cancelled = false
            for _ in 0..<12 where completions.withLock({ $0 }) == 0 && !cancelled {
                if Int.random(in: 0..<8, using: &random) == 0 {
                    token?.cancel()
                    cancelled = true
                } else {
                    step(sources, &random)
                }
            }
            let atCancel = completions.withLock { $0 }
            // Then the sources answer until nothing is left to answer (or the load completed).
            var steps = 0
            while sources.hasWork, steps < 200, cancelled || completions.withLock({ $0 }) == 0 {
                step(sources, &random)
                steps += 1
            }
            let count = completions.withLock { $0 }
            let context = "seed \(seed): \(loader.description)"
            XCTAssertLessThanOrEqual(count, 1, "completed more than once, \(context)")
            if cancelled {
                XCTAssertEqual(count, atCancel, "completed after its cancel returned, \(context)")
            } else {
                XCTAssertEqual(count, 1, "never completed though its sources answered, \(context)")
            }
            token = nil
            XCTAssertNil(
                watched, "kept its completion after it \(cancelled ? "was cancelled" : "completed"), \(context)")
        }
    }

    // MARK: Histories

    /// One thing happening: a pending request answered (a value or a failure), a pending save completed, or the clock
    /// moved on.
    private func step(_ sources: Sources, _ random: inout SeededRandom) {
        var choices: [() -> Void] = []
        for spy in sources.spies {
            for index in spy.pendingRequests {
                choices.append { spy.complete(with: index, at: index) }
                choices.append { spy.fail(with: Failure(), at: index) }
            }
        }
        for place in sources.caches.indices {
            let cache = sources.caches[place]
            for index in sources.pendingSaves(ofCache: place) {
                choices.append {
                    sources.completedSaves[place].insert(index)
                    cache.completeSave(with: .success(()), at: index)
                }
                choices.append {
                    sources.completedSaves[place].insert(index)
                    cache.completeSave(with: .failure(Failure()), at: index)
                }
            }
        }
        if sources.scheduler.pendingCount > 0 {
            let seconds = Int.random(in: 0...3, using: &random)
            choices.append { sources.scheduler.advance(by: .seconds(seconds)) }
        }
        guard !choices.isEmpty else { return }
        choices[Int.random(in: choices.indices, using: &random)]()
    }

    // MARK: Compositions

    /// A loader and how it was made, for the failure messages.
    private struct Described {
        let loader: AnyLoader<Int>
        let description: String

    }

    /// A random composition of `depth` levels of composites over new spies.
    private func composition(depth: Int, _ sources: Sources, _ random: inout SeededRandom) -> Described {
        guard depth > 0 else {
            let spy = LoaderSpy<Int>()
            sources.spies.append(spy)
            return Described(loader: AnyLoader(spy), description: "spy")
        }
        let inner = composition(depth: depth - 1, sources, &random)
        let scheduler = sources.scheduler
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            let other = composition(depth: Int.random(in: 0..<depth, using: &random), sources, &random)
            return Described(
                loader: AnyLoader(inner.loader.fallback(to: other.loader)),
                description: "\(inner.description).fallback(to: \(other.description))")
        case 1:
            let cache = CacheSpy<Int>(completingWith: nil)
            sources.caches.append(cache)
            sources.completedSaves.append([])
            return Described(
                loader: AnyLoader(inner.loader.caching(to: cache, policy: .failLoad)),
                description: "\(inner.description).caching(.failLoad)")
        case 2:
            let cache = CacheSpy<Int>(completingWith: nil)
            sources.caches.append(cache)
            sources.completedSaves.append([])
            return Described(
                loader: AnyLoader(inner.loader.caching(to: cache)), description: "\(inner.description).caching")
        case 3:
            let attempts = Int.random(in: 2...3, using: &random)
            return Described(
                loader: AnyLoader(
                    inner.loader.retry(.constant(.seconds(1), maxAttempts: attempts), scheduler: scheduler)),
                description: "\(inner.description).retry(\(attempts))")
        case 4:
            return Described(
                loader: AnyLoader(inner.loader.timeout(after: .seconds(2), scheduler: scheduler)),
                description: "\(inner.description).timeout")
        case 5:
            return Described(
                loader: AnyLoader(inner.loader.receive(on: scheduler)), description: "\(inner.description).receive(on:)"
            )
        case 6:
            return Described(
                loader: AnyLoader(inner.loader.retry(.immediate(maxAttempts: 2), scheduler: scheduler)),
                description: "\(inner.description).retry(immediate)")
        default:
            return Described(loader: AnyLoader(inner.loader.map { $0 + 1 }), description: "\(inner.description).map")
        }
    }
}
