import Loading

/// The depths of the scaling scenarios.
let chainDepths = [1, 2, 4, 8, 16]

/// The ways each chain is loaded, as its variants name them.
let chainKinds = ["hand-written", "Loader", "AnyLoader<Int>", "any Loader<Int>"]

/// Scenarios 12a and 12b: chains of 1 to 16 fallback levels, at their concrete type, in `AnyLoader`, behind
/// `any Loader<Int>` and hand-written; the primary succeeds (each level adds one wrapper around it) or every source but the last fails
/// (each level runs both its sides).
func fallbackDepthScenario(loads: Int, primaryFails: Bool) -> Scenario {
    let succeeding = opaque(ImmediateLoader(result: .success(opaque(1))))
    let failing = opaque(ImmediateLoader(result: .failure(BenchmarkError())))
    let primary = primaryFails ? failing : succeeding
    let tally = Tally()
    let deliver: @Sendable (Result<Int, any Error>) -> Void = opaqueFunction { result in
        tally.value &+= (try? result.get()) ?? 0
    }
    func checksum() -> Int {
        defer { tally.value = 0 }
        return tally.value
    }
    var variants: [Variant] = []
    // Depth d: d - 1 levels falling back to a failing source, then one to a succeeding source. Each chain is passed
    // at its concrete type, so that its variant runs specialized.
    func add(_ depth: Int, _ chain: some Loader<Int>) {
        variants.append(
            Variant(name: "hand-written, depth \(depth)") { count in
                let chain = opaque(handFallbackChain(depth: depth, primaryFails: primaryFails))
                for _ in 0..<count { chain.load(completion: deliver) }
                return checksum()
            })
        variants += chainVariants(depth, chain, deliver, checksum)
    }
    add(1, primary.fallback(to: succeeding))
    add(2, oneLevel(primary, failing).fallback(to: succeeding))
    add(4, twoLevels(oneLevel(primary, failing), failing).fallback(to: succeeding))
    add(8, fourLevels(twoLevels(oneLevel(primary, failing), failing), failing).fallback(to: succeeding))
    add(
        16,
        eightLevels(fourLevels(twoLevels(oneLevel(primary, failing), failing), failing), failing)
            .fallback(to: succeeding))
    let kind = primaryFails ? "every source but the last fails" : "the primary succeeds"
    return Scenario(
        title: "12\(primaryFails ? "b" : "a"). Fallback chains of 1 to 16 levels, \(kind)",
        unit: "loads", operations: loads, reference: "hand-written, depth 1", variants: variants,
        targets: [
            perLevel(
                "Loader", atMost: 2,
                label: "one added fallback level (\(kind)), instructions vs a hand-written level"),
            CountTarget(
                label: "one added fallback level (\(kind)), allocations", limit: 1,
                measure: { table in
                    guard let deep = table.allocations("Loader, depth 16"),
                        let shallow = table.allocations("Loader, depth 1")
                    else { return nil }
                    return (deep - shallow) / 15
                }, format: "%.1f"),
        ],
        expectedChecksum: { $0 },
        countNotes: scalingTable(kinds: chainKinds, stage: "level"))
}

/// Scenario 13: chains of 1 to 16 maps over an immediate source, at their concrete type, in `AnyLoader`, behind
/// `any Loader<Int>` and hand-written.
func mapDepthScenario(loads: Int) -> Scenario {
    let source = opaque(ImmediateLoader(result: .success(opaque(1))))
    let increment: @Sendable (Int) -> Int = opaqueFunction { $0 &+ 1 }
    let tally = Tally()
    let deliver: @Sendable (Result<Int, any Error>) -> Void = opaqueFunction { result in
        tally.value &+= (try? result.get()) ?? 0
    }
    var variants: [Variant] = []
    func add(_ depth: Int, _ chain: some Loader<Int>) {
        // Each variant delivers 1 + depth per load; the checksum is normalised to one per load.
        let checksum = {
            defer { tally.value = 0 }
            return tally.value / (1 + depth)
        }
        variants.append(
            Variant(name: "hand-written, depth \(depth)") { count in
                var chain: any HandLoading = HandSource(.success(1))
                for _ in 0..<depth { chain = HandMap(chain, transform: increment) }
                chain = opaque(chain)
                for _ in 0..<count { chain.load(completion: deliver) }
                return checksum()
            })
        variants += chainVariants(depth, chain, deliver, checksum)
    }
    add(1, source.map(increment))
    add(2, source.map(increment).map(increment))
    add(4, twoMaps(twoMaps(source, increment), increment))
    add(8, fourMaps(fourMaps(source, increment), increment))
    add(16, fourMaps(fourMaps(fourMaps(fourMaps(source, increment), increment), increment), increment))
    return Scenario(
        title: "13. Map chains of 1 to 16 stages over an immediate source", unit: "loads", operations: loads,
        reference: "hand-written, depth 1", variants: variants, expectedChecksum: { $0 },
        countNotes: scalingTable(kinds: chainKinds, stage: "map"))
}

/// The variants of one chain: loaded at its concrete type (specialized where the caller names the type), wrapped
/// in `AnyLoader` where its type is known (the wrapper keeps that specialized load), and behind `any Loader<Int>`
/// (each step runs in its generic form).
func chainVariants<Chain: Loader<Int>>(
    _ depth: Int, _ chain: Chain, _ deliver: @escaping LoadCompletion<Int>, _ checksum: @escaping () -> Int
) -> [Variant] {
    let erased: any Loader<Int> = opaque(chain)
    let wrapped = opaque(chain.eraseToAnyLoader())
    return [
        Variant(name: "AnyLoader<Int>, depth \(depth)") { count in
            for _ in 0..<count { wrapped.load(completion: deliver) }
            return checksum()
        },
        Variant(name: "Loader, depth \(depth)") { count in
            for _ in 0..<count { chain.load(completion: deliver) }
            return checksum()
        },
        Variant(name: "any Loader<Int>, depth \(depth)") { count in
            for _ in 0..<count { erased.load(completion: deliver) }
            return checksum()
        },
    ]
}

func oneLevel<L: Loader<Int>>(_ loader: L, _ next: ImmediateLoader) -> some Loader<Int> { loader.fallback(to: next) }
func twoLevels<L: Loader<Int>>(_ loader: L, _ next: ImmediateLoader) -> some Loader<Int> {
    oneLevel(oneLevel(loader, next), next)
}
func fourLevels<L: Loader<Int>>(_ loader: L, _ next: ImmediateLoader) -> some Loader<Int> {
    twoLevels(twoLevels(loader, next), next)
}
func eightLevels<L: Loader<Int>>(_ loader: L, _ next: ImmediateLoader) -> some Loader<Int> {
    fourLevels(fourLevels(loader, next), next)
}
func twoMaps<L: Loader<Int>>(_ loader: L, _ transform: @escaping @Sendable (Int) -> Int) -> some Loader<Int> {
    loader.map(transform).map(transform)
}
func fourMaps<L: Loader<Int>>(_ loader: L, _ transform: @escaping @Sendable (Int) -> Int) -> some Loader<Int> {
    twoMaps(twoMaps(loader, transform), transform)
}

/// The hand-written fallback chain of `depth` levels, built as an app would (existentials, at run time).
func handFallbackChain(depth: Int, primaryFails: Bool) -> any HandLoading {
    let failure: Result<Int, any Error> = .failure(BenchmarkError())
    var chain: any HandLoading = HandSource(primaryFails ? failure : .success(1))
    for _ in 1..<depth { chain = HandFallback(primary: chain, fallback: HandSource(failure)) }
    return HandFallback(primary: chain, fallback: HandSource(.success(1)))
}

/// The instructions one added stage of `kind` costs (depth 16 minus depth 1, over 15), at most `ratio` times a
/// hand-written stage.
func perLevel(_ kind: String, atMost ratio: Double, label: String) -> CountTarget {
    CountTarget(
        label: label, limit: ratio,
        measure: { table in
            guard let stage = stageCost(table, kind), let hand = stageCost(table, "hand-written") else { return nil }
            return stage / max(hand, 1)
        }, format: "%.2fx")
}

/// Instructions per added stage from depth 1 to depth 16.
func stageCost(_ table: CountTable, _ kind: String) -> Double? {
    guard let deep = table.instructions("\(kind), depth 16"), let shallow = table.instructions("\(kind), depth 1")
    else { return nil }
    return (deep - shallow) / 15
}

/// A table of what each added stage costs between consecutive depths, per kind of chain: flat when the cost per
/// stage does not grow with depth.
func scalingTable(kinds: [String], stage: String) -> (CountTable) -> [String] {
    { table in
        var lines = ["  instructions per added \(stage), between consecutive depths (and allocations):"]
        for kind in kinds {
            var cells: [String] = []
            for (shallow, deep) in zip(chainDepths, chainDepths.dropFirst()) {
                guard let low = table.instructions("\(kind), depth \(shallow)"),
                    let high = table.instructions("\(kind), depth \(deep)"),
                    let lowAllocations = table.allocations("\(kind), depth \(shallow)"),
                    let highAllocations = table.allocations("\(kind), depth \(deep)")
                else {
                    cells.append("\(shallow)->\(deep): -")
                    continue
                }
                let stages = Double(deep - shallow)
                cells.append(
                    "\(shallow)->\(deep): "
                        + String(
                            format: "%.0f (%.1f)", (high - low) / stages, (highAllocations - lowAllocations) / stages))
            }
            lines.append(
                "    " + kind.padding(toLength: 18, withPad: " ", startingAt: 0) + cells.joined(separator: "  "))
        }
        return lines
    }
}
