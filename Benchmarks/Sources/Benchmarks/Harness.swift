import Foundation

/// Keeps a value or closure opaque to the optimizer, so that no variant is folded away.
@inline(never)
func opaque<T>(_ value: T) -> T { value }

/// A closure passed through ``opaque(_:)``.
func opaqueFunction<Input, Output>(_ function: @escaping @Sendable (Input) -> Output) -> @Sendable (Input) -> Output {
    opaque(function)
}

/// One way of doing a scenario's work: runs `operations` operations and returns a checksum the harness verifies.
struct Variant {
    let name: String
    let run: (_ operations: Int) -> Int
}

/// A scenario: variants interleaved in each repetition (order rotated), the same operations for each, and ratios
/// paired per repetition against the reference. Its targets are checked on counts (see `Counts.swift`): times are
/// reported beside them.
struct Scenario {
    let title: String
    let unit: String
    let operations: Int
    let reference: String
    let variants: [Variant]
    var targets: [CountTarget] = []
    /// The checksum every variant must return for `operations` operations.
    let expectedChecksum: (Int) -> Int
    var note: String? = nil
    /// How many operations a counting child runs (and twice that): fewer for heavy operations; 0 to count nothing
    /// (thread hops make such counts differ from run to run).
    var countedOperations: Int? = nil
    /// Lines printed under the scenario's counts (a scaling table, say).
    var countNotes: ((CountTable) -> [String])? = nil
    /// Run once before any variant (what the variants read, say).
    var prepare: (() -> Void)? = nil
}

struct Measurement {
    let variant: String
    var perOperation: [Double] = []  // seconds, one per repetition
}

enum Harness {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func run(_ scenario: Scenario, repetitions: Int, report: inout Report) throws {
        var measurements = scenario.variants.map { Measurement(variant: $0.name) }
        scenario.prepare?()
        // Warm-up: one untimed pass each, which also checks every variant's side effects.
        for variant in scenario.variants {
            let checksum = variant.run(max(scenario.operations / 10, 1))
            guard checksum == scenario.expectedChecksum(max(scenario.operations / 10, 1)) else {
                throw Failure(description: "\(scenario.title): \(variant.name) returned checksum \(checksum)")
            }
        }
        for repetition in 0..<repetitions {
            let count = scenario.variants.count
            for offset in 0..<count {
                let index = (offset + repetition) % count
                let variant = scenario.variants[index]
                let start = DispatchTime.now().uptimeNanoseconds
                let checksum = variant.run(scenario.operations)
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                guard checksum == scenario.expectedChecksum(scenario.operations) else {
                    throw Failure(description: "\(scenario.title): \(variant.name) returned checksum \(checksum)")
                }
                measurements[index].perOperation.append(elapsed / Double(scenario.operations))
            }
        }
        report.add(scenario, measurements)
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The printed table.
struct Report {
    private(set) var lines: [String] = []

    mutating func add(_ scenario: Scenario, _ measurements: [Measurement]) {
        let reference = measurements.first { $0.variant == scenario.reference }!
        lines.append("")
        lines.append(
            "\(scenario.title) (\(Self.count(scenario.operations)) \(scenario.unit) per repetition, \(reference.perOperation.count) repetitions)"
        )
        if let note = scenario.note { lines.append("  \(note)") }
        lines.append(
            "  " + pad("variant", 40) + pad("median", 12) + pad("min - max", 24) + "vs " + scenario.reference)
        for measurement in measurements {
            let ratio = pairedRatio(measurement, reference)
            let line =
                "  " + pad(measurement.variant, 40) + pad(Self.time(median(measurement.perOperation)), 12)
                + pad(
                    "\(Self.time(measurement.perOperation.min() ?? .nan)) - \(Self.time(measurement.perOperation.max() ?? .nan))",
                    24)
                + String(format: "%.2fx", ratio)
            lines.append(line)
        }
    }

    mutating func addLine(_ line: String) { lines.append(line) }

    /// The median over repetitions of (variant time / other time), both measured in the same repetition.
    private func pairedRatio(_ variant: Measurement, _ other: Measurement) -> Double {
        median(zip(variant.perOperation, other.perOperation).map { $0 / $1 })
    }

    static func time(_ seconds: Double) -> String {
        switch seconds {
        case ..<1e-6: String(format: "%.1f ns", seconds * 1e9)
        case ..<1e-3: String(format: "%.2f µs", seconds * 1e6)
        case ..<1: String(format: "%.2f ms", seconds * 1e3)
        default: String(format: "%.2f s", seconds)
        }
    }

    static func count(_ value: Int) -> String {
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        return formatter.string(from: NSNumber(value: value)) ?? "\(value)"
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
