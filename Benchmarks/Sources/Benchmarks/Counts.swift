import Foundation
import Loading

/// The counts of one scenario's variants, per operation.
struct CountTable {
    let rows: [(name: String, instructions: Double?, allocations: Double?)]

    func instructions(_ variant: String) -> Double? { rows.first { $0.name == variant }?.instructions ?? nil }
    func allocations(_ variant: String) -> Double? { rows.first { $0.name == variant }?.allocations ?? nil }
}

/// A claim checked on counts per operation, which do not move with the machine's load: the figure `measure` takes
/// from the scenario's counts must be at most `limit`.
struct CountTarget {
    let label: String
    let limit: Double
    let measure: (CountTable) -> Double?
    var format = "%.0f"

    /// `variant` costs at most `limit` instructions per operation, divided by `per` (deliveries per operation, say).
    static func instructions(_ variant: String, atMost limit: Double, per: Double = 1, label: String) -> CountTarget {
        CountTarget(label: label, limit: limit) { table in table.instructions(variant).map { $0 / per } }
    }

    /// `variant` costs at most `ratio` times the instructions of `reference`.
    static func instructions(_ variant: String, atMost ratio: Double, of reference: String, label: String)
        -> CountTarget
    {
        CountTarget(
            label: label, limit: ratio,
            measure: { table in
                guard let variant = table.instructions(variant), let reference = table.instructions(reference) else {
                    return nil
                }
                return variant / max(reference, 1)
            }, format: "%.2fx")
    }

    /// `variant` allocates at most `limit` times per operation.
    static func allocations(_ variant: String, atMost limit: Double, label: String) -> CountTarget {
        CountTarget(label: label, limit: limit, measure: { $0.allocations(variant) }, format: "%.1f")
    }
}

/// A target's verdict, printed last.
struct Verdict {
    let scenario: String
    let target: CountTarget
    let measured: Double?

    var passed: Bool { measured.map { $0 <= target.limit } ?? false }

    var line: String {
        let figure = measured.map { String(format: target.format, $0) } ?? "not measured"
        let limit = String(format: target.format, target.limit)
        return "  \(passed ? "✓ pass" : "✗ miss")  \(target.label): \(figure) (target <= \(limit))  [\(scenario)]"
    }
}

/// `--counts`: instructions and heap allocations per operation, for every variant of every scenario (or only those
/// `counts` says), each counted in child runs of a stripped copy of this binary under callgrind (the allocations are
/// its calls of the allocator's entry points): the count for 2N operations minus the count for N, over N, so that
/// start-up and set-up cancel out. Deterministic where times are not, and whatever else the machine runs: the
/// children run as many at once as the machine has cores. Slow (valgrind). Ends with every scenario's targets, pass
/// or miss.
@discardableResult
func printCounts(
    scenarios: [(builder: Int, scenario: Scenario)], operations: Int,
    counts: (_ scenario: String, _ variant: String) -> Bool = { _, _ in true }
) -> [String: CountTable] {
    // Printed as counted: a full count takes minutes.
    var lines = Lines()
    lines += [
        "",
        "Counts per operation (marginal: the count for 2N operations minus the count for N, over N, with N = "
            + "\(operations) unless shown; valgrind on a stripped copy of this binary)",
    ]
    let setUp = valgrindAndStrippedBinary()
    guard case .success(let (valgrind, binary)) = setUp else {
        if case .failure(let problem) = setUp { lines.append("  \(problem.reason): skipped") }
        return [:]
    }
    defer { try? FileManager.default.removeItem(at: binary.deletingLastPathComponent()) }
    var verdicts: [Verdict] = []
    var tables: [String: CountTable] = [:]
    for (builder, scenario) in scenarios {
        let operations = scenario.countedOperations ?? operations
        lines.append("")
        guard operations > 0 else {
            lines.append(scenario.title + ": not counted (its work hops between threads; counts would vary)")
            continue
        }
        lines.append(scenario.title + (scenario.countedOperations == nil ? "" : " (N = \(operations))"))
        lines.append(
            "  " + "variant".padding(toLength: 40, withPad: " ", startingAt: 0)
                + "instructions".padding(toLength: 16, withPad: " ", startingAt: 0)
                + "allocations".padding(toLength: 14, withPad: " ", startingAt: 0) + "instructions vs "
                + scenario.reference)
        let variants = scenario.variants.map(\.name).filter { counts(scenario.title, $0) }
        // Each variant's two child runs (N and 2N operations), all of them at once, a core each.
        let runs = variants.flatMap { variant in
            [operations, 2 * operations].map { (variant: variant, operations: $0) }
        }
        let results = Locked([ChildCount?](repeating: nil, count: runs.count))
        let title = scenario.title
        DispatchQueue.concurrentPerform(iterations: runs.count) { index in
            let run = runs[index]
            // The child builds the scenario at this run's sizes, so that it finds it by its title.
            let child =
                (quick ? ["--quick"] : []) + [
                    "--count-child", String(builder), title, run.variant, String(run.operations),
                ]
            let result = count(valgrind, binary, child)
            results.withLock { $0[index] = result }
        }
        let counts = results.withLock { $0 }
        func marginal(_ variant: String, _ figure: KeyPath<ChildCount, Int>) -> Double? {
            func counted(_ operations: Int) -> Int? {
                runs.indices.first { runs[$0] == (variant, operations) }.flatMap { counts[$0]?[keyPath: figure] }
            }
            guard let few = counted(operations), let many = counted(2 * operations) else { return nil }
            return Double(many - few) / Double(operations)
        }
        let counted = variants.map {
            (name: $0, instructions: marginal($0, \.instructions), allocations: marginal($0, \.allocations))
        }
        let table = CountTable(rows: counted)
        tables[scenario.title] = table
        let reference = table.instructions(scenario.reference)
        for row in counted {
            var ratio = "-"
            if let instructions = row.instructions, let reference {
                ratio = String(format: "%.2fx", instructions / max(reference, 1))
            }
            let instructions = row.instructions.map { String(format: "%.0f", $0) } ?? "-"
            let allocations = row.allocations.map { String(format: "%.1f", $0) } ?? "-"
            let name = row.name.padding(toLength: max(40, row.name.count + 1), withPad: " ", startingAt: 0)
            lines.append(
                "  " + name + instructions.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + allocations.padding(toLength: 14, withPad: " ", startingAt: 0) + ratio)
        }
        lines += scenario.countNotes?(table) ?? []
        // A target over variants left uncounted is not judged.
        verdicts += scenario.targets.compactMap { target in
            let measured = target.measure(table)
            guard measured != nil || variants.count == scenario.variants.count else { return nil }
            return Verdict(scenario: scenario.title, target: target, measured: measured)
        }
    }
    if !verdicts.isEmpty {
        lines.append("")
        lines.append("Targets, checked on the counts above:")
        lines += verdicts.map(\.line)
        let missed = verdicts.filter { !$0.passed }.count
        lines.append(
            missed == 0 ? "All \(verdicts.count) targets reached." : "\(missed) of \(verdicts.count) targets missed.")
    }
    return tables
}

/// Lines printed as they are added.
struct Lines {
    mutating func append(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func += (lines: inout Lines, more: [String]) {
        for line in more { lines.append(line) }
    }
}

/// Runs `operations` operations of one variant of one scenario (in a child process under valgrind).
func runCountChild(builder: Int, scenarioTitle: String, variantName: String, operations: Int) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-count-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    // Only the builder that makes this scenario runs: the others' set-up would blur the counts.
    let builders = scenarioBuilders(quick: quick, folder: folder)
    guard builders.indices.contains(builder),
        let scenario = builders[builder]().first(where: { $0.title == scenarioTitle }),
        let variant = scenario.variants.first(where: { $0.name == variantName })
    else {
        FileHandle.standardError.write(Data("no variant \(variantName) in \(scenarioTitle)\n".utf8))
        exit(1)
    }
    scenario.prepare?()
    _ = variant.run(operations)
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

/// What one child run counted: the instructions it ran and the heap blocks it allocated.
struct ChildCount: Sendable {
    let instructions: Int
    let allocations: Int
}

/// The instructions and heap allocations of one child run of `binary` with `arguments`, from one run under callgrind.
func count(_ valgrind: String, _ binary: URL, _ arguments: [String]) -> ChildCount? {
    let profile = binary.deletingLastPathComponent().appendingPathComponent("callgrind-\(UUID().uuidString).out")
    defer { try? FileManager.default.removeItem(at: profile) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: valgrind)
    process.arguments = ["--tool=callgrind", "--callgrind-out-file=\(profile.path)", binary.path] + arguments
    // Hash tables seeded per process would change the counts from one run to the next.
    process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_DETERMINISTIC_HASHING": "1"]) { $1 }
    let pipe = Pipe()
    process.standardError = pipe
    process.standardOutput = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0,
        let range = output.range(of: #"Collected : ([0-9]+)"#, options: .regularExpression),
        let instructions = Int(output[range].filter(\.isNumber)),
        let text = try? String(contentsOf: profile, encoding: .utf8)
    else { return nil }
    return ChildCount(instructions: instructions, allocations: allocatorCalls(inCallgrindProfile: text))
}

/// The calls of the C allocator's entry points a callgrind profile records, from every caller: the heap blocks the
/// run allocated, as memcheck counts them (`operator new` and Swift's allocation call `malloc`, counted there).
func allocatorCalls(inCallgrindProfile profile: String) -> Int {
    let allocators: Set<Substring> = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign"]
    // A function is named in full the first time, as `(id) name`, and by its id after that.
    var names: [Substring: Substring] = [:]
    var callee: Substring?
    var calls = 0
    for line in profile.split(separator: "\n", omittingEmptySubsequences: true) {
        if line.hasPrefix("fn=") || line.hasPrefix("cfn=") {
            let reference = line.drop { $0 != "(" }
            let id = reference.prefix { $0 != ")" }
            let name = reference.drop { $0 != ")" }.dropFirst().drop { $0 == " " }
            if !name.isEmpty { names[id] = name }
            callee = line.hasPrefix("cfn=") ? names[id] : nil
        } else if line.hasPrefix("calls="), let name = callee {
            if allocators.contains(name) { calls += Int(line.dropFirst(6).prefix { $0 != " " }) ?? 0 }
            callee = nil
        }
    }
    return calls
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

/// A recorded count per operation, which `--gate` holds the current counts to.
struct RecordedCount {
    let scenario: String
    let variant: String
    let instructions: Double
    let allocations: Double

    /// The rows of the Markdown table between `<!-- recorded counts: begin -->` and `<!-- recorded counts: end -->`
    /// in `text`: `| scenario title prefix | variant | instructions | allocations |`.
    static func parse(_ text: String) -> [RecordedCount] {
        guard let start = text.range(of: "<!-- recorded counts: begin -->"),
            let end = text.range(of: "<!-- recorded counts: end -->", range: start.upperBound..<text.endIndex)
        else { return [] }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let numbers = cells.dropFirst(2).map { Double($0.replacingOccurrences(of: ",", with: "")) }
            guard cells.count == 4, let instructions = numbers[0], let allocations = numbers[1] else { return nil }
            return RecordedCount(
                scenario: cells[0], variant: cells[1], instructions: instructions, allocations: allocations)
        }
    }
}

/// Compares `tables` with `recorded`: a figure more than `tolerance` above its record is a regression. Prints one
/// line per figure; returns whether none regressed (and every recorded figure was counted).
func gate(_ tables: [String: CountTable], against recorded: [RecordedCount], tolerance: Double = 0.10) -> Bool {
    var lines = Lines()
    lines.append("")
    lines.append("Regression gate: each recorded count per operation, allowed \(Int(tolerance * 100))% more")
    var passed = !recorded.isEmpty
    for record in recorded {
        let table = tables.first { $0.key.hasPrefix(record.scenario) }?.value
        guard let instructions = table?.instructions(record.variant),
            let allocations = table?.allocations(record.variant)
        else {
            lines.append("  ✗ not counted: \(record.scenario) \(record.variant)")
            passed = false
            continue
        }
        let ok =
            instructions <= record.instructions * (1 + tolerance)
            && allocations <= record.allocations * (1 + tolerance) + 0.05
        if !ok { passed = false }
        lines.append(
            String(
                format: "  %@ %@ %@: %.0f instructions (recorded %.0f), %.1f allocations (recorded %.1f)",
                ok ? "✓" : "✗ regressed:", record.scenario, record.variant, instructions, record.instructions,
                allocations, record.allocations))
    }
    lines.append(passed ? "No regression." : "Regression gate failed.")
    return passed
}
