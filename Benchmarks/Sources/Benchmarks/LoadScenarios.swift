import Dispatch
import Loading
import OpenCombine

/// Scenarios 2 and 3: one load through fallback + caching + map, delivered to a callback.
func singleShotScenario(loads: Int, primaryFails: Bool) -> Scenario {
    let primaryResult: Result<Int, any Error> = primaryFails ? .failure(BenchmarkError()) : .success(opaque(1))
    let secondaryResult: Result<Int, any Error> = .success(opaque(2))
    let transform: @Sendable (Int) -> Int = opaqueFunction { $0 &* 10 }
    let saved = Tally()
    let delivered = Tally()
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

    // The reference: the hand-written, non-generic callback chain an app would write without the library (a loader protocol, a fallback
    // composite and a caching decorator as classes over it), built once. No cancellation, no thread-safety.
    let handChain: any HandLoading = opaque(
        HandMap(
            HandCaching(
                HandFallback(primary: HandSource(primaryResult), fallback: HandSource(secondaryResult)),
                save: { saved.value &+= $0 }),
            transform: transform))
    let hand = Variant(name: "hand-written callbacks") { count in
        for _ in 0..<count { handChain.load(completion: deliver) }
        return checksum()
    }
    // The same work written inline, which the optimizer turns into straight-line code: the floor, for scale.
    let inlinePrimary = opaque(primaryResult)
    let inlineSecondary = opaque(secondaryResult)
    let inline = Variant(name: "inline code (the floor)") { count in
        for _ in 0..<count {
            let value: Int
            switch inlinePrimary {
            case .success(let primary): value = primary
            case .failure: value = (try? inlineSecondary.get()) ?? 0
            }
            saved.value &+= value
            deliver(.success(transform(value)))
        }
        return checksum()
    }

    let primary = opaque(ImmediateLoader(result: primaryResult))
    let secondary = opaque(ImmediateLoader(result: secondaryResult))
    let cache = opaque(TallyCache(tally: saved))
    let composedOnce = primary.fallback(to: secondary).caching(to: cache).map(transform)
    let composites = Variant(name: "Loader composites (built once)") { count in
        for _ in 0..<count { composedOnce.load(completion: deliver) }
        return checksum()
    }
    let erased: any Loader<Int> = opaque(composedOnce)
    let compositesErased = Variant(name: "Loader composites as any Loader<Int>") { count in
        for _ in 0..<count { erased.load(completion: deliver) }
        return checksum()
    }
    let anyLoader = opaque(composedOnce.eraseToAnyLoader())
    let compositesAnyLoader = Variant(name: "Loader composites as AnyLoader<Int>") { count in
        for _ in 0..<count { anyLoader.load(completion: deliver) }
        return checksum()
    }
    let compositesPerLoad = Variant(name: "Loader composites (built per load)") { count in
        for _ in 0..<count {
            primary.fallback(to: secondary).caching(to: cache).map(transform).load(completion: deliver)
        }
        return checksum()
    }

    let streamPipeline = EventStream<Int, any Error>.deferred { .future { promise in promise(primaryResult) } }
        .catch { _ in EventStream<Int, any Error>.deferred { .future { promise in promise(secondaryResult) } } }
        .handleEvents(receiveOutput: { saved.value &+= $0 })
        .map(transform)
    let stream = Variant(name: "EventStream pipeline") { count in
        for _ in 0..<count {
            _ = streamPipeline.sink { _ in
            } receiveValue: {
                delivered.value &+= $0
            }
        }
        return checksum()
    }

    let combinePipeline = OpenCombine.Deferred {
        OpenCombine.Future<Int, any Error> { promise in promise(primaryResult) }
    }
    .catch { _ in OpenCombine.Deferred { OpenCombine.Future<Int, any Error> { promise in promise(secondaryResult) } } }
    .handleEvents(receiveOutput: { saved.value &+= $0 })
    .map(transform)
    let openCombine = Variant(name: "OpenCombine pipeline") { count in
        for _ in 0..<count {
            _ = combinePipeline.sink { _ in
            } receiveValue: {
                delivered.value &+= $0
            }
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
        variants: [
            hand, inline, composites, compositesErased, compositesAnyLoader, compositesPerLoad, stream, openCombine,
            asyncChain,
        ],
        targets: primaryFails
            ? []
            : [
                .instructions(
                    "Loader composites (built once)", atMost: 1.3, of: "hand-written callbacks",
                    label: "single-shot fallback + caching + map, concrete type, instructions vs hand-written"),
                .allocations(
                    "Loader composites (built once)", atMost: 3,
                    label: "single-shot fallback + caching + map, concrete type, allocations per load"),
                .instructions(
                    "Loader composites as AnyLoader<Int>", atMost: 2, of: "hand-written callbacks",
                    label: "the same chain wrapped in AnyLoader, instructions vs hand-written"),
                .instructions(
                    "Loader composites as any Loader<Int>", atMost: 2.5, of: "hand-written callbacks",
                    label: "the same chain held as any Loader, instructions vs hand-written"),
            ],
        expectedChecksum: { count in count &* (value &+ value &* 10) })
}

/// A loader protocol, as an app would hand-write it.
protocol HandLoading: AnyObject, Sendable {
    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void)
}

/// A source that answers at once.
final class HandSource: HandLoading {
    let result: Result<Int, any Error>
    init(_ result: Result<Int, any Error>) { self.result = result }
    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) { completion(result) }
}

/// A hand-written fallback composite.
final class HandFallback: HandLoading {
    let primary: any HandLoading
    let fallback: any HandLoading
    init(primary: any HandLoading, fallback: any HandLoading) {
        self.primary = primary
        self.fallback = fallback
    }
    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        primary.load { [fallback] result in
            switch result {
            case .success: completion(result)
            case .failure: fallback.load(completion: completion)
            }
        }
    }
}

/// A caching decorator.
final class HandCaching: HandLoading {
    let decoratee: any HandLoading
    let save: @Sendable (Int) -> Void
    init(_ decoratee: any HandLoading, save: @escaping @Sendable (Int) -> Void) {
        self.decoratee = decoratee
        self.save = save
    }
    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        decoratee.load { [save] result in
            if case .success(let value) = result { save(value) }
            completion(result)
        }
    }
}

/// A mapping decorator.
final class HandMap: HandLoading {
    let decoratee: any HandLoading
    let transform: @Sendable (Int) -> Int
    init(_ decoratee: any HandLoading, transform: @escaping @Sendable (Int) -> Int) {
        self.decoratee = decoratee
        self.transform = transform
    }
    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        decoratee.load { [transform] result in completion(result.map(transform)) }
    }
}
