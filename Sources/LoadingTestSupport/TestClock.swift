import Foundation
import Loading

/// A wall clock a test moves by hand, for caches and stores that take `now: () -> Date`.
///
/// ```swift
/// let clock = TestClock()
/// let memory = MemoryCache<String, Int>(expiry: .maxAge(.seconds(60)), now: { clock.now })
/// clock.advance(by: 61)  // what memory holds has now expired
/// ```
public final class TestClock: Sendable {
    private let current: Locked<Date>

    /// Creates a clock showing `start`.
    public init(_ start: Date = Date(timeIntervalSinceReferenceDate: 800_000_000)) {
        current = Locked(start)
    }

    /// The clock's time.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock by `seconds` (back when negative).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}
