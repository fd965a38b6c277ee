import Foundation
import XCTest

extension ModelCheck {
    /// What the history of one seed came to.
    enum Outcome {
        case agreed
        /// The search for an order that explains a concurrent history ran past its budget: neither shown right nor
        /// wrong.
        case undecided
        /// The history disagreed: what to print.
        case failed(String)
    }

    /// Checks one seed after another: from `LOADING_MODEL_SEED` (else 1), `LOADING_MODEL_HISTORIES` of them (else
    /// `histories`, what CI runs: 1,000 unless a check on files asks fewer), or as many as fit in
    /// `LOADING_MODEL_SOAK_SECONDS`; each `LOADING_MODEL_REPEAT` times
    /// (else once), to chase a failure that needs a rare interleaving. `check` gets a seed and its history's length
    /// (`LOADING_MODEL_LENGTH`, else 40 to 240 steps). The first failure fails the test; the totals are printed, with
    /// the rate a soak runs at.
    static func soak(
        _ name: String, histories: Int = 1_000, file: StaticString = #filePath, line: UInt = #line,
        check: (_ seed: UInt64, _ length: Int) -> Outcome
    ) {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["LOADING_MODEL_SOAK_SECONDS"].flatMap(Double.init)
        let budget = seconds == nil ? Int(environment["LOADING_MODEL_HISTORIES"] ?? "") ?? histories : .max
        let firstSeed = UInt64(environment["LOADING_MODEL_SEED"] ?? "") ?? 1
        let repeats = max(Int(environment["LOADING_MODEL_REPEAT"] ?? "") ?? 1, 1)
        let length = environment["LOADING_MODEL_LENGTH"].flatMap(Int.init)
        let started = Date()
        var (checked, undecided, seed) = (0, 0, firstSeed)
        while checked < budget {
            if let seconds, Date().timeIntervalSince(started) > seconds { break }
            switch check(seed, length ?? 40 + Int(seed % 5) * 50) {
            case .agreed: break
            case .undecided: undecided += 1
            case .failed(let failure):
                return XCTFail("seed \(seed), after \(checked) histories agreed: \(failure)", file: file, line: line)
            }
            checked += 1
            if checked % repeats == 0 { seed += 1 }
        }
        let elapsed = Date().timeIntervalSince(started)
        print(
            "\(name): \(checked) histories (seeds \(firstSeed)...\(max(seed, firstSeed + 1) - 1)) in "
                + String(format: "%.1f s, %.0f histories/s", elapsed, Double(checked) / max(elapsed, 0.001))
                + ", \(undecided) undecided")
    }
}
