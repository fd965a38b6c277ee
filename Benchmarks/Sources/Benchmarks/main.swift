import Foundation

let arguments = Set(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")

if let index = CommandLine.arguments.firstIndex(of: "--count-child") {
    let arguments = Array(CommandLine.arguments[(index + 1)...])
    runCountChild(
        builder: Int(arguments[0]) ?? 0, scenarioTitle: arguments[1], variantName: arguments[2],
        operations: Int(arguments[3]) ?? 0)
    exit(0)
}

/// Builders of every scenario, at the sizes of a full run or of a quick one (each builder makes one or a few).
func scenarioBuilders(quick: Bool, folder: URL) -> [() -> [Scenario]] {
    [
        { [throughputScenario(values: quick ? 10_000 : 1_000_000)] },
        { [singleShotScenario(loads: quick ? 1_000 : 200_000, primaryFails: false)] },
        { [singleShotScenario(loads: quick ? 1_000 : 200_000, primaryFails: true)] },
        { [composerMemoryHitScenario(loads: quick ? 1_000 : 100_000)] },
        { sqliteScenarios(rows: quick ? 500 : 10_000, folder: folder) },
        { [concurrencyScenario(callers: quick ? 100 : 1_000)] },
        { [filterThroughputScenario(values: quick ? 10_000 : 1_000_000)] },
        { [keyedMemoryHitScenario(loads: quick ? 1_000 : 200_000)] },
        { [keyedCoalescingScenario(callers: quick ? 100 : 1_000)] },
        { diskCacheScenarios(values: quick ? 100 : 1_000, folder: folder) },
        { [decodeFriendsScenario(friends: quick ? 1_000 : 100_000)] },
        { [fallbackDepthScenario(loads: quick ? 1_000 : 10_000, primaryFails: false)] },
        { [fallbackDepthScenario(loads: quick ? 1_000 : 10_000, primaryFails: true)] },
        { [mapDepthScenario(loads: quick ? 1_000 : 10_000)] },
        { [mergeScenario(values: quick ? 10_000 : 500_000)] },
        { [fanOutScenario(sends: quick ? 100 : 10_000)] },
        { [storeObservationScenario(writes: quick ? 100 : 10_000)] },
        { [storePathsScenario(operations: quick ? 1_000 : 100_000)] },
        { [storeAsyncHitScenario(reads: quick ? 1_000 : 100_000)] },
        { [pageAppendScenario(appends: quick ? 1_000 : 100_000)] },
        { [mutationReplayScenario(mutations: quick ? 100 : 1_000)] },
        {
            [
                storeSizeScenario(label: "a", keys: 1_000, pages: 100, operations: quick ? 1_000 : 10_000),
                storeSizeScenario(label: "b", keys: 100_000, pages: 1_000, operations: quick ? 1_000 : 10_000),
            ]
        },
        { [durableMutationScenario(mutations: quick ? 20 : 1_000, folder: folder)] },
        {
            [
                queueSizeScenario(label: "a", queued: 1_000, operations: quick ? 100 : 1_000),
                queueSizeScenario(label: "b", queued: 100_000, operations: quick ? 100 : 1_000),
            ]
        },
        {
            [
                entityEditScenario(label: "a", holders: 1, edits: quick ? 100 : 10_000),
                entityEditScenario(label: "b", holders: 100, edits: quick ? 100 : 1_000, countedEdits: 50),
                entityEditScenario(label: "c", holders: 1_000, edits: quick ? 20 : 100, countedEdits: 5),
            ]
        },
        {
            [
                creationReplayScenario(label: "a", queued: 250, operations: quick ? 100 : 1_000),
                creationReplayScenario(label: "b", queued: 10_000, operations: quick ? 100 : 1_000),
            ]
        },
        { [sharedWriteScenario(writes: quick ? 1_000 : 100_000, folder: folder)] },
        { [entityOverheadScenario(operations: quick ? 1_000 : 100_000)] },
    ]
}

let repetitions = quick ? 3 : 11
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("loading-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }

var report = Report()
report.addLine(
    "Loading benchmarks, \(quick ? "quick mode (small sizes; timings not meaningful)" : "release build"), \(Date())")
report.addLine(
    "Each row: median time per operation over repetitions, min - max, and the median of ratios paired per repetition.")

// Each scenario with the index of the builder that made it (a counting child runs that builder alone).
let built = scenarioBuilders(quick: quick, folder: folder).enumerated().flatMap { index, build in
    build().map { (builder: index, scenario: $0) }
}
// `--only 12` or `--only 16.,17.,18.`: the scenarios whose title starts with one of the prefixes.
let only = CommandLine.arguments.firstIndex(of: "--only").map {
    CommandLine.arguments[$0 + 1].split(separator: ",").map(String.init)
}

// `--growth` (and `--growth-gate`, which fails the run when an operation's cost grows with the work): scenario 21.
// `GROWTH_SIZES=1000,4000,16000` runs other sizes (to look at a workload suspected of growing, without waiting for it
// at 100,000).
if arguments.contains("--growth") || arguments.contains("--growth-gate") {
    let sizes = ProcessInfo.processInfo.environment["GROWTH_SIZES"].map {
        $0.split(separator: ",").compactMap { Int($0) }
    }
    let (lines, passed) = growthReport(
        sizes: sizes ?? [1_000, 10_000, 100_000], gates: arguments.contains("--growth-gate"))
    print(lines.joined(separator: "\n"))
    exit(passed ? 0 : 1)
}

let chosen = built.filter { built in only.map { $0.contains { built.scenario.title.hasPrefix($0) } } ?? true }
let countedOperations = quick ? 200 : 1_000
if arguments.contains("--counts") {
    // `--gate FILE`: fail when a count recorded in FILE (see the Benchmarks README) regressed by more than 10%; only the
    // recorded variants are counted (the others' ratios and targets are then not shown).
    guard let index = CommandLine.arguments.firstIndex(of: "--gate") else {
        printCounts(scenarios: chosen, operations: countedOperations)
        exit(0)
    }
    let file = URL(fileURLWithPath: CommandLine.arguments[index + 1])
    let recorded = RecordedCount.parse((try? String(contentsOf: file, encoding: .utf8)) ?? "")
    let tables = printCounts(scenarios: chosen, operations: countedOperations) { scenario, variant in
        recorded.contains { scenario.hasPrefix($0.scenario) && $0.variant == variant }
    }
    let gated = Set(recorded.map(\.scenario))
    exit(gate(tables.filter { table in gated.contains { table.key.hasPrefix($0) } }, against: recorded) ? 0 : 1)
}

var printed = 0
do {
    for (_, scenario) in chosen {
        try Harness.run(scenario, repetitions: repetitions, report: &report)
        print(report.lines.suffix(from: printed).joined(separator: "\n"))
        printed = report.lines.count
    }
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    exit(1)
}
if only.map({ $0.contains { "17.".hasPrefix($0) || $0.hasPrefix("17") } }) ?? true {
    print("\n" + storeMemoryPerKeyLines(keys: quick ? 10_000 : 100_000).joined(separator: "\n"))
}
// A full run ends with the growth table, the counts and the targets' verdicts; a quick run (CI) only proves the
// scenarios run.
if !quick {
    if only == nil { print(growthReport(sizes: [1_000, 10_000, 100_000], gates: false).lines.joined(separator: "\n")) }
    printCounts(scenarios: chosen, operations: countedOperations)
}
