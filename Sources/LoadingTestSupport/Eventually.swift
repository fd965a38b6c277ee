import Foundation

/// Whether `condition` holds within `timeout`, checked about once a millisecond on the calling thread: for a test
/// that waits for work on other threads without sleeping a fixed time. It returns as soon as the condition holds.
/// The timeout is a watchdog that fails a hang, not a measure of speed: by default a minute, so that a test waits as
/// long as a busy machine needs.
///
/// ```swift
/// let done = Locked(false)
/// DispatchQueue.global().async { done.withLock { $0 = true } }
/// XCTAssertTrue(eventually { done.withLock { $0 } })
/// ```
public func eventually(timeout: Duration = .seconds(60), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        // Polling, not waiting a fixed time: the condition is checked again at once after a short yield.
        Thread.sleep(forTimeInterval: 0.001)
    }
    return true
}

/// ``eventually(timeout:_:)`` for async tests: the condition is checked about once a millisecond, without blocking
/// a thread.
public func eventually(timeout: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

/// ``eventually(timeout:_:)`` for a test on the main actor, whose condition reads main-actor state: it is checked
/// about once a millisecond, and main-actor work (a model's updates) runs in between.
///
/// ```swift
/// @MainActor func test_screenShowsTheList() async {
///     let shown = Locked(false)
///     DispatchQueue.main.async { shown.withLock { $0 = true } }
///     let appeared = await eventuallyOnMainActor { shown.withLock { $0 } }
///     XCTAssertTrue(appeared)
/// }
/// ```
@MainActor
public func eventuallyOnMainActor(timeout: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
