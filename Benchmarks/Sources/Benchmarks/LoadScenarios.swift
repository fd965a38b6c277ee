import Dispatch
import Loading
import OpenCombine

/// Scenarios 2 and 3: one load through fallback + caching + map, delivered to a callback.
func singleShotScenario(loads: Int, primaryFails: Bool) -> Scenario {
    let primaryResult: Result<Int, any Error> = primaryFails ? .failure(BenchmarkError()) : .success(opaque(1))
    let secondaryResult: Result<Int, any Error> = .success(opaque(2))
    let transform: @Sendable (Int) -> Int = opaqueFunction { $0 &* 10 }
    let saved = Tally(), delivered = Tally()
    let deliver: @Sendable (Result<Int, any Error>) -> Void = opaqueFunction { result in
        if case .success(let value) = result { delivered.value &+= value }
    }
    @Sendable func checksum() -> Int {
        defer {
            saved.value = 0
            delivered.value = 0
        }
        return saved.value &+ delivered.value
    }

    // The reference: a hand-written, non-generic callback chain doing the same work, as seed 000 writes it: sources
    // with escaping completions (real sources answer later), no cancellation, no thread-safety.
    final class HandSource: @unchecked Sendable {
        let result: Result<Int, any Error>
        init(_ result: Result<Int, any Error>) { self.result = result }
        func load(_ completion: @escaping (Result<Int, any Error>) -> Void) { completion(opaque(result)) }
    }
    let handPrimary = opaque(HandSource(primaryResult)), handSecondary = opaque(HandSource(secondaryResult))
    func handChain(_ completion: @escaping (Result<Int, any Error>) -> Void) {
        handPrimary.load { result in
            switch result {
            case .success(let value):
                saved.value &+= value
                completion(.success(transform(value)))
            case .failure:
                handSecondary.load { result in
                    switch result {
                    case .success(let value):
                        saved.value &+= value
                        completion(.success(transform(value)))
                    case .failure(let error):
                        completion(.failure(error))
                    }
                }
            }
        }
    }
    let hand = Variant(name: "hand-written callbacks") { count in
        for _ in 0..<count { handChain(deliver) }
        return checksum()
    }

    let primary = opaque(ImmediateLoader(result: primaryResult)), secondary = opaque(ImmediateLoader(result: secondaryResult))
    let cache = opaque(TallyCache(tally: saved))
    let composedOnce = primary.fallback(to: secondary).caching(to: cache).map(transform)
    let composites = Variant(name: "Loader composites (built once)") { count in
        for _ in 0..<count { composedOnce.load(completion: deliver) }
        return checksum()
    }
    let compositesPerLoad = Variant(name: "Loader composites (built per load)") { count in
        for _ in 0..<count { primary.fallback(to: secondary).caching(to: cache).map(transform).load(completion: deliver) }
        return checksum()
    }

    let streamPipeline = EventStream<Int, any Error>.deferred { .future { promise in promise(primaryResult) } }
        .catch { _ in EventStream<Int, any Error>.deferred { .future { promise in promise(secondaryResult) } } }
        .handleEvents(receiveOutput: { saved.value &+= $0 })
        .map(transform)
    let stream = Variant(name: "EventStream pipeline") { count in
        for _ in 0..<count {
            _ = streamPipeline.sink(receiveCompletion: { _ in }) { delivered.value &+= $0 }
        }
        return checksum()
    }

    let combinePipeline = OpenCombine.Deferred { OpenCombine.Future<Int, any Error> { promise in promise(primaryResult) } }
        .catch { _ in OpenCombine.Deferred { OpenCombine.Future<Int, any Error> { promise in promise(secondaryResult) } } }
        .handleEvents(receiveOutput: { saved.value &+= $0 })
        .map(transform)
    let openCombine = Variant(name: "OpenCombine pipeline") { count in
        for _ in 0..<count {
            _ = combinePipeline.sink(receiveCompletion: { _ in }) { delivered.value &+= $0 }
        }
        return checksum()
    }

    @Sendable func primaryAsync() async throws -> Int { try primaryResult.get() }
    @Sendable func secondaryAsync() async throws -> Int { try secondaryResult.get() }
    @Sendable func chainAsync() async throws -> Int {
        let value: Int
        do { value = try await primaryAsync() } catch { value = try await secondaryAsync() }
        saved.value &+= value
        return transform(value)
    }
    let asyncChain = Variant(name: "async/await chain") { count in
        blocking {
            for _ in 0..<count {
                if let value = try? await chainAsync() { delivered.value &+= value }
            }
            return checksum()
        }
    }

    let value = primaryFails ? 2 : 1
    return Scenario(
        title: primaryFails
            ? "3. Fallback path: the primary fails, the fallback succeeds (+ caching + map)"
            : "2. Single-shot load: fallback (primary succeeds) + caching + map",
        unit: "loads", operations: loads, reference: "hand-written callbacks",
        variants: [hand, composites, compositesPerLoad, stream, openCombine, asyncChain],
        targets: [
            Target(variant: "Loader composites (built once)", against: "hand-written callbacks", limit: 1.0, label: "<= 1.0x hand-written"),
            Target(variant: "EventStream pipeline", against: "OpenCombine pipeline", limit: 0.2, label: "<= 0.2x OpenCombine"),
        ],
        expectedChecksum: { count in count &* (value &+ value &* 10) })
}
