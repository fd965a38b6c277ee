import Foundation
import Loading
import OpenCombine

/// Scenario 7: heap allocations per single-shot load, counted by valgrind's memcheck in child runs of this binary
/// (the difference between N and 2N loads, divided by N, so start-up allocations cancel out).
func allocationsReport(quick: Bool) -> [String] {
    var lines = [
        "", "7. Allocations per single-shot load (fallback, primary succeeds, + caching + map), counted by valgrind",
    ]
    let setUp = valgrindAndStrippedBinary()
    guard case .success(let (valgrind, binary)) = setUp else {
        if case .failure(let problem) = setUp { lines.append("  \(problem.reason): skipped") }
        return lines
    }
    defer { try? FileManager.default.removeItem(at: binary.deletingLastPathComponent()) }
    let loads = quick ? 200 : 2_000
    for (variant, title) in [
        ("hand", "hand-written callbacks"), ("composites", "Loader composites"),
        ("stream", "EventStream pipeline"),
        ("opencombine", "OpenCombine pipeline"),
    ] {
        guard let few = count(.allocations, valgrind, binary, ["--allocations-child", variant, String(loads)]),
            let many = count(.allocations, valgrind, binary, ["--allocations-child", variant, String(2 * loads)])
        else {
            lines.append("  \(title): could not be measured")
            continue
        }
        lines.append(
            "  " + title.padding(toLength: 34, withPad: " ", startingAt: 0)
                + String(format: "%.1f allocations per load", Double(many - few) / Double(loads)))
    }
    return lines
}

/// A copy of this binary without its debug info (valgrind 3.19 cannot read the DWARF 5 that Swift 6 writes).
func strippedCopyOfThisBinary() -> URL? {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "loading-bench-valgrind-\(UUID().uuidString)")
    let copy = folder.appendingPathComponent("Benchmarks")
    do {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath(), to: copy)
    } catch {
        return nil
    }
    let strip = Process()
    strip.executableURL = URL(fileURLWithPath: "/usr/bin/strip")
    strip.arguments = ["-g", copy.path]
    guard (try? strip.run()) != nil else { return nil }
    strip.waitUntilExit()
    return strip.terminationStatus == 0 ? copy : nil
}

/// Runs `loads` single-shot loads of one variant (in a child process under valgrind).
func runAllocationChild(variant: String, loads: Int) {
    if variant.hasPrefix("composite:") {
        // One composite at a time over an immediate source, for finding where allocations come from.
        let source = ImmediateLoader(result: .success(opaque(1)))
        let tally = Tally()
        let deliver: @Sendable (Result<Int, any Error>) -> Void = opaqueFunction { _ in tally.value &+= 1 }
        switch variant.dropFirst("composite:".count) {
        case "source": for _ in 0..<loads { _ = source.load(completion: deliver) }
        case "map":
            let loader = source.map { $0 + 1 }
            for _ in 0..<loads { loader.load(completion: deliver) }
        case "caching":
            let loader = source.caching(to: TallyCache(tally: tally))
            for _ in 0..<loads { loader.load(completion: deliver) }
        case "fallback":
            let loader = source.fallback(to: source)
            for _ in 0..<loads { loader.load(completion: deliver) }
        default: break
        }
        return
    }
    if variant.hasPrefix("sqlite-read:") {
        let name = String(variant.dropFirst("sqlite-read:".count))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-child-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let scenarios = sqliteScenarios(rows: 10_000, folder: folder)
        _ = scenarios[0].variants.map { $0.run(1) }  // fill both databases
        _ = scenarios[1].variants.first { $0.name.hasPrefix(name) }?.run(loads)
        try? FileManager.default.removeItem(at: folder)
        return
    }
    if variant.hasPrefix("composer:") {
        let name = String(variant.dropFirst("composer:".count))
        _ = composerMemoryHitScenario(loads: loads).variants.first { $0.name.hasPrefix(name) }?.run(loads)
        return
    }
    if variant.hasPrefix("throughput:") {
        let name = String(variant.dropFirst("throughput:".count))
        _ = throughputScenario(values: loads).variants.first { $0.name.hasPrefix(name) }?.run(loads)
        return
    }
    let scenario = singleShotScenario(loads: loads, primaryFails: false)
    let names = [
        "hand": "hand-written callbacks", "composites": "Loader composites (built once)",
        "stream": "EventStream pipeline", "opencombine": "OpenCombine pipeline",
    ]
    guard let name = names[variant], let chosen = scenario.variants.first(where: { $0.name == name }) else { return }
    _ = chosen.run(loads)
}
