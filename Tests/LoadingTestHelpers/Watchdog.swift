import Foundation
import Loading
import XCTest

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

/// Waits until the task is cancelled: an operation that never answers (a database that hangs) ends only this way.
package func hangUntilCancelled() async {
    let (never, end) = AsyncStream<Never>.makeStream()
    await withTaskCancellationHandler {
        for await _ in never {}
    } onCancel: {
        end.finish()
    }
}

/// Whether `condition`, asked again and again (yielding the thread in between), holds before the watchdog runs out:
/// for a condition that needs `await` (an actor's state).
package func eventuallyAsync(_ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .watchdog
    while !(await condition()) {
        guard ContinuousClock.now < deadline else { return false }
        await Task.yield()
    }
    return true
}

/// Spins for a random number of steps, at most `steps` (a step is a nanosecond or two): varies the moment the caller
/// goes on by a few microseconds, so that threads interleave differently from one history to the next. Jitter, never
/// a wait for anything; it asks nothing of the scheduler, so a busy machine slows it no more than the rest.
package func jitter(upTo steps: Int) {
    var spun = 0
    for step in 0..<Int.random(in: 0...steps) { spun &+= step }
    withExtendedLifetime(spun) {}
}

/// Runs the main queue (from the main thread) until `condition` holds; fails the test when the watchdog runs out
/// first. Returns whether it held.
@discardableResult
package func spinMainQueue(
    until condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
) -> Bool {
    let deadline = Date().addingTimeInterval(.watchdog)
    while !condition() {
        guard Date() < deadline else {
            XCTFail(
                "the condition did not hold within the watchdog (\(Int(TimeInterval.watchdog)) s)", file: file,
                line: line)
            return false
        }
        RunLoop.current.run(until: Date().addingTimeInterval(0.002))
    }
    return true
}

/// Runs the main queue (from the main thread) until what was queued on it before this call ran, and what that
/// queued in turn, `rounds` deep: work that hops to the main queue has happened, without waiting a fixed time.
package func drainMainQueue(rounds: Int = 3) {
    for _ in 0..<rounds {
        let ran = Locked(false)
        DispatchQueue.main.async { ran.withLock { $0 = true } }
        spinMainQueue { ran.withLock { $0 } }
    }
}
