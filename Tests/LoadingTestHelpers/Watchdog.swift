import Foundation

// How long the tests wait, and how big the heavy ones are. A test never asks the machine for a speed: it waits for
// what must happen, with a deadline only to fail a hang, and its size can grow or shrink with the machine.

extension TimeInterval {
    /// How long a test waits for something that must happen before it calls it a hang: a watchdog, never a measure
    /// of speed. On a busy machine a test takes longer; it does not fail.
    package static let watchdog: TimeInterval = 60
}

extension Duration {
    /// ``Swift/Double/watchdog`` as a duration.
    package static let watchdog = Duration.seconds(60)
}

/// How many times bigger than its default a heavy test runs: `LOADING_TEST_SCALE`, a positive number (1 when unset).
/// `LOADING_TEST_SCALE=10` makes every heavy test ten times bigger; `0.1` a tenth as big, never smaller than each
/// test's floor.
package let testScale: Double = {
    guard let text = ProcessInfo.processInfo.environment["LOADING_TEST_SCALE"] else { return 1 }
    guard let scale = Double(text), scale > 0, scale.isFinite else {
        fatalError("LOADING_TEST_SCALE must be a positive number, like 0.5 or 10; it is “\(text)”")
    }
    return scale
}()

/// The size of a heavy test: `size` times ``testScale``, and at least `floor` (what the test needs to mean anything).
package func scaled(_ size: Int, floor: Int = 1) -> Int {
    max(floor, Int((Double(size) * testScale).rounded()))
}
