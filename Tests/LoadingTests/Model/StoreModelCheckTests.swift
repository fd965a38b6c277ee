import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// The store checked against ``StoreModel`` over random histories: a fixed budget of seeded histories here (what CI
/// runs), or a soak for a given time with `LOADING_MODEL_SOAK_SECONDS` (see the README's contributing section). A
/// disagreement is shrunk and printed as a test to paste below.
final class StoreModelCheckTests: XCTestCase {
    func test_randomHistories_agreeWithTheModel() {
        let environment = ProcessInfo.processInfo.environment
        let soak = environment["LOADING_MODEL_SOAK_SECONDS"].flatMap(Double.init)
        let budget = soak == nil ? Int(environment["LOADING_MODEL_HISTORIES"] ?? "") ?? 400 : .max
        let firstSeed = UInt64(environment["LOADING_MODEL_SEED"] ?? "") ?? 1
        let started = Date()
        var checked = 0
        var seed = firstSeed
        while checked < budget {
            if let soak, Date().timeIntervalSince(started) > soak { break }
            let length = 40 + Int(seed % 5) * 50  // 40 to 240 steps
            let history = ModelCheck.history(seed: seed, length: length)
            if let disagreement = ModelCheck.run(history) {
                let shrunk = ModelCheck.shrink(disagreement)
                XCTFail(
                    """
                    seed \(seed): the store disagreed with the model after \(checked) histories agreed \
                    (\(disagreement.history.count) steps, shrunk to \(shrunk.history.count)):
                    \(shrunk)
                    Paste as a test:
                    \(ModelCheck.testCase(shrunk, seed: seed))
                    """)
                return
            }
            checked += 1
            seed += 1
        }
        let seconds = Date().timeIntervalSince(started)
        print(
            "Model check: \(checked) histories agreed (seeds \(firstSeed)..<\(seed)) in "
                + String(format: "%.1f s, %.0f histories/s", seconds, Double(checked) / max(seconds, 0.001)))
    }

    // MARK: Histories that once disagreed

}
