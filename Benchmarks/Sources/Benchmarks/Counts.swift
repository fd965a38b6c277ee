import Foundation

/// `--counts`: instructions (callgrind) and heap allocations (memcheck) per operation, for every variant of every
/// scenario, each counted in child runs of a stripped copy of this binary: the count for 2N operations minus the
/// count for N, over N, so that start-up and set-up cancel out. Deterministic where times are not; slow (valgrind).
func countsReport(scenarios: [(builder: Int, scenario: Scenario)], operations: Int) -> [String] {
    var lines = [
        "",
        "Counts per operation (marginal: the count for \(2 * operations) operations minus the count for \(operations), "
            + "over \(operations); valgrind on a stripped copy of this binary)",
    ]
    let setUp = valgrindAndStrippedBinary()
    guard case .success(let (valgrind, binary)) = setUp else {
        if case .failure(let problem) = setUp { lines.append("  \(problem.reason): skipped") }
        return lines
    }
    defer { try? FileManager.default.removeItem(at: binary.deletingLastPathComponent()) }
    for (builder, scenario) in scenarios {
        lines.append("")
        lines.append(scenario.title)
        lines.append(
            "  " + "variant".padding(toLength: 36, withPad: " ", startingAt: 0)
                + "instructions".padding(toLength: 16, withPad: " ", startingAt: 0)
                + "allocations".padding(toLength: 14, withPad: " ", startingAt: 0) + "instructions vs "
                + scenario.reference)
        var counted: [(name: String, instructions: Double?, allocations: Double?)] = []
        for variant in scenario.variants {
            let child = ["--count-child", String(builder), scenario.title, variant.name]
            func marginal(_ tool: CountingTool) -> Double? {
                guard let few = count(tool, valgrind, binary, child + [String(operations)]),
                    let many = count(tool, valgrind, binary, child + [String(2 * operations)])
                else { return nil }
                return Double(many - few) / Double(operations)
            }
            counted.append((variant.name, marginal(.instructions), marginal(.allocations)))
        }
        let reference = counted.first { $0.name == scenario.reference }?.instructions
        for row in counted {
            var ratio = "-"
            if let instructions = row.instructions, let reference {
                ratio = String(format: "%.2fx", instructions / max(reference, 1))
            }
            let instructions = row.instructions.map { String(format: "%.0f", $0) } ?? "-"
            let allocations = row.allocations.map { String(format: "%.1f", $0) } ?? "-"
            let name = row.name.padding(toLength: 36, withPad: " ", startingAt: 0)
            lines.append(
                "  " + name + instructions.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + allocations.padding(toLength: 14, withPad: " ", startingAt: 0) + ratio)
        }
    }
    return lines
}

/// Runs `operations` operations of one variant of one scenario (in a child process under valgrind).
func runCountChild(builder: Int, scenarioTitle: String, variantName: String, operations: Int) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-count-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    // Only the builder that makes this scenario runs: the others' set-up would blur the counts.
    let builders = scenarioBuilders(quick: true, folder: folder)
    guard builders.indices.contains(builder),
        let scenario = builders[builder]().first(where: { $0.title == scenarioTitle })
    else { return }
    _ = scenario.variants.first { $0.name == variantName }?.run(operations)
}

/// Why valgrind cannot count here.
struct ValgrindUnavailable: Error {
    let reason: String
}

/// valgrind, and a copy of this binary it can read; remove the copy's folder when done.
func valgrindAndStrippedBinary() -> Result<(valgrind: String, binary: URL), ValgrindUnavailable> {
    guard
        let valgrind = ["/usr/bin/valgrind", "/usr/local/bin/valgrind"].first(
            where: FileManager.default.isExecutableFile)
    else { return .failure(ValgrindUnavailable(reason: "valgrind not found")) }
    guard let binary = strippedCopyOfThisBinary() else {
        return .failure(ValgrindUnavailable(reason: "could not copy and strip this binary for valgrind"))
    }
    return .success((valgrind, binary))
}

enum CountingTool {
    case instructions, allocations
}

/// The instructions or heap allocations of one child run of `binary` with `arguments`.
func count(_ tool: CountingTool, _ valgrind: String, _ binary: URL, _ arguments: [String]) -> Int? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: valgrind)
    let options =
        switch tool {
        case .instructions: ["--tool=callgrind", "--callgrind-out-file=/dev/null"]
        case .allocations: ["--tool=memcheck", "--leak-check=no"]
        }
    process.arguments = options + [binary.path] + arguments
    // Hash tables seeded per process would change the counts from one run to the next.
    process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_DETERMINISTIC_HASHING": "1"]) { $1 }
    let pipe = Pipe()
    process.standardError = pipe
    process.standardOutput = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let pattern =
        switch tool {
        case .instructions: #"Collected : ([0-9]+)"#
        case .allocations: #"total heap usage: ([0-9,]+) allocs"#
        }
    guard let range = output.range(of: pattern, options: .regularExpression) else { return nil }
    return Int(output[range].filter(\.isNumber))
}
