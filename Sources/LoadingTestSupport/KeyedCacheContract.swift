import Dispatch
import Foundation
import Loading
import XCTest

/// The contract every ``KeyedCache`` keeps, as checks a test suite can run against its own cache: reading, writing,
/// removing, and (when the cache takes an expiry and a clock) expiring.
///
/// ```swift
/// func test_keyedCacheContract() {
///     KeyedCacheContract(keys: ("a", "b"), sampleValues: (1, 2)) { expiry, now in
///         MemoryCache<String, Int>(expiry: expiry, now: now)
///     }.verify()
/// }
/// ```
/// The checks: an absent key misses with ``CacheMiss/absent``; a saved value is read back with the date the clock
/// gave at the save; a later save replaces an earlier one; keys do not affect each other; removing a key removes it
/// alone, and removing all empties the cache; every completion runs exactly once. With `expiry: true`: a value
/// younger than its maximum age is fresh and one exactly that old is expired (``CacheMiss/expired(savedAt:)``), an
/// expired value is removed, a value stamped in the future (the clock set back) is expired, and the cache reports the
/// expiry it was given (`expiry`), by which a `Store` judges the values it holds itself.
public struct KeyedCacheContract<C: KeyedCache> where C.Value: Equatable {
    private let keys: (C.Key, C.Key)
    private let sampleValues: (C.Value, C.Value)
    private let timeout: Double
    private let makeCache: (_ expiry: CacheExpiry<C.Value>, _ now: @escaping @Sendable () -> Date) -> C

    /// Creates the checks for fresh, empty caches built by `makeCache` with the expiry and the clock it is given,
    /// using two different `keys` and two different `sampleValues`.
    public init(
        keys: (C.Key, C.Key),
        sampleValues: (C.Value, C.Value),
        timeout: Double = 5,
        makeCache: @escaping (_ expiry: CacheExpiry<C.Value>, _ now: @escaping @Sendable () -> Date) -> C
    ) {
        self.keys = keys
        self.sampleValues = sampleValues
        self.timeout = timeout
        self.makeCache = makeCache
    }

    /// Runs every check (the expiry checks only with `expiry: true`), failing the current test at the caller's line
    /// for each broken rule.
    public func verify(expiry: Bool = true, file: StaticString = #filePath, line: UInt = #line) {
        assertAbsentKeyMisses(file: file, line: line)
        assertSavedValueIsReadWithItsSaveDate(file: file, line: line)
        assertLaterSaveReplacesEarlierOne(file: file, line: line)
        assertRemovingRemovesOnlyThatKey(file: file, line: line)
        assertRemovingAllEmptiesTheCache(file: file, line: line)
        if expiry {
            assertMaxAgeBoundary(file: file, line: line)
            assertExpiredValueIsRemoved(file: file, line: line)
            assertValueStampedInTheFutureIsExpired(file: file, line: line)
            assertExpiryIsReported(file: file, line: line)
        }
    }

    /// A cache made with a maximum age reports it (`expiry`), so that a `Store` over it serves none of the values it
    /// holds itself past that age; one made with no expiry reports none.
    public func assertExpiryIsReported(file: StaticString = #filePath, line: UInt = #line) {
        let savedAt = Date(timeIntervalSinceReferenceDate: 0)
        let reported = makeCache(.maxAge(.seconds(60))) { Date() }.expiry
        XCTAssertTrue(
            reported.isFresh(sampleValues.0, savedAt: savedAt, now: savedAt.addingTimeInterval(59.5))
                && !reported.isFresh(sampleValues.0, savedAt: savedAt, now: savedAt.addingTimeInterval(60)),
            "the cache reports its maximum age as its expiry", file: file, line: line)
        XCTAssertTrue(
            makeCache(.never) { Date() }.expiry.isFresh(
                sampleValues.0, savedAt: savedAt, now: savedAt.addingTimeInterval(100 * 365 * 86_400)),
            "a cache that never expires reports no age limit", file: file, line: line)
    }

    /// Reading a key nothing was saved for fails with ``CacheMiss/absent``.
    public func assertAbsentKeyMisses(file: StaticString = #filePath, line: UInt = #line) {
        let cache = makeCache(.never) { Date() }
        assertMiss(read(keys.0, from: cache, file: file, line: line), .absent, file: file, line: line)
    }

    /// A saved value is read back with the date the cache's clock gave when it was saved.
    public func assertSavedValueIsReadWithItsSaveDate(file: StaticString = #filePath, line: UInt = #line) {
        let clock = TestClock()
        let cache = makeCache(.never) { clock.now }
        let savedAt = clock.now
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        clock.advance(by: 10)
        let read = read(keys.0, from: cache, file: file, line: line)
        XCTAssertEqual(try? read?.get().value, sampleValues.0, "the saved value", file: file, line: line)
        XCTAssertEqual(try? read?.get().savedAt, savedAt, "the save's date", file: file, line: line)
    }

    /// A later save replaces the earlier value, and keys do not affect each other.
    public func assertLaterSaveReplacesEarlierOne(file: StaticString = #filePath, line: UInt = #line) {
        let cache = makeCache(.never) { Date() }
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        save(sampleValues.1, for: keys.1, to: cache, file: file, line: line)
        save(sampleValues.1, for: keys.0, to: cache, file: file, line: line)
        XCTAssertEqual(
            try? read(keys.0, from: cache, file: file, line: line)?.get().value, sampleValues.1, file: file, line: line)
        XCTAssertEqual(
            try? read(keys.1, from: cache, file: file, line: line)?.get().value, sampleValues.1, file: file, line: line)
    }

    /// Removing a key removes its value and leaves the other keys' values.
    public func assertRemovingRemovesOnlyThatKey(file: StaticString = #filePath, line: UInt = #line) {
        let cache = makeCache(.never) { Date() }
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        save(sampleValues.1, for: keys.1, to: cache, file: file, line: line)
        run("remove", file: file, line: line) { cache.removeValue(for: keys.0, completion: $0) }
        assertMiss(read(keys.0, from: cache, file: file, line: line), .absent, file: file, line: line)
        XCTAssertEqual(
            try? read(keys.1, from: cache, file: file, line: line)?.get().value, sampleValues.1, file: file, line: line)
        run("remove an absent key", file: file, line: line) { cache.removeValue(for: keys.0, completion: $0) }
    }

    /// Removing all values empties the cache.
    public func assertRemovingAllEmptiesTheCache(file: StaticString = #filePath, line: UInt = #line) {
        let cache = makeCache(.never) { Date() }
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        save(sampleValues.1, for: keys.1, to: cache, file: file, line: line)
        run("remove all", file: file, line: line) { cache.removeAll(completion: $0) }
        assertMiss(read(keys.0, from: cache, file: file, line: line), .absent, file: file, line: line)
        assertMiss(read(keys.1, from: cache, file: file, line: line), .absent, file: file, line: line)
    }

    /// Under a maximum age, a value is fresh until just before that age and expired at exactly that age.
    public func assertMaxAgeBoundary(file: StaticString = #filePath, line: UInt = #line) {
        let clock = TestClock()
        let cache = makeCache(.maxAge(.seconds(60))) { clock.now }
        let savedAt = clock.now
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        clock.advance(by: 59.5)
        XCTAssertEqual(
            try? read(keys.0, from: cache, file: file, line: line)?.get().value, sampleValues.0, "fresh before its age",
            file: file, line: line)
        clock.advance(by: 0.5)
        assertMiss(
            read(keys.0, from: cache, file: file, line: line), .expired(savedAt: savedAt), file: file, line: line)
    }

    /// An expired value is removed when it is read: with the clock set back, it is absent, not fresh again.
    public func assertExpiredValueIsRemoved(file: StaticString = #filePath, line: UInt = #line) {
        let clock = TestClock()
        let cache = makeCache(.maxAge(.seconds(60))) { clock.now }
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        clock.advance(by: 61)
        _ = read(keys.0, from: cache, file: file, line: line)
        clock.advance(by: -61)
        assertMiss(read(keys.0, from: cache, file: file, line: line), .absent, file: file, line: line)
    }

    /// A value saved while the clock was ahead (stamped in the future) is expired, not fresh for as long as the
    /// clock was ahead.
    public func assertValueStampedInTheFutureIsExpired(file: StaticString = #filePath, line: UInt = #line) {
        let clock = TestClock()
        let cache = makeCache(.maxAge(.seconds(3_600))) { clock.now }
        clock.advance(by: 86_400)
        let savedAt = clock.now
        save(sampleValues.0, for: keys.0, to: cache, file: file, line: line)
        clock.advance(by: -86_400)
        assertMiss(
            read(keys.0, from: cache, file: file, line: line), .expired(savedAt: savedAt), file: file, line: line)
    }

    // MARK: Helpers

    private func save(_ value: C.Value, for key: C.Key, to cache: C, file: StaticString, line: UInt) {
        run("save", file: file, line: line) { cache.save(value, for: key, completion: $0) }
    }

    private func read(_ key: C.Key, from cache: C, file: StaticString, line: UInt) -> Result<
        CachedValue<C.Value>, any Error
    >? {
        let outcome = Locked<[Result<CachedValue<C.Value>, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        cache.value(for: key) { result in
            outcome.withLock { $0.append(result) }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else {
            XCTFail("a read did not complete", file: file, line: line)
            return nil
        }
        // A second, awaited read (of the other key) gives a wrong second completion the time to show.
        let barrier = DispatchSemaphore(value: 0)
        cache.value(for: keys.1) { _ in barrier.signal() }
        _ = barrier.wait(timeout: .now() + timeout)
        XCTAssertEqual(outcome.withLock { $0.count }, 1, "a read completed more than once", file: file, line: line)
        return outcome.withLock { $0.first }
    }

    private func run(
        _ operation: String,
        file: StaticString,
        line: UInt,
        _ start: (@escaping @Sendable (Result<Void, any Error>) -> Void) -> Void
    ) {
        let outcome = Locked<[Result<Void, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        start { result in
            outcome.withLock { $0.append(result) }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else {
            return XCTFail("\(operation) did not complete", file: file, line: line)
        }
        if case .failure(let error) = outcome.withLock({ $0.first }) {
            XCTFail("\(operation) failed: \(error)", file: file, line: line)
        }
    }

    private func assertMiss(
        _ result: Result<CachedValue<C.Value>, any Error>?,
        _ expected: CacheMiss,
        file: StaticString,
        line: UInt
    ) {
        guard case .failure(let error)? = result else {
            return XCTFail("expected \(expected), got \(String(describing: result))", file: file, line: line)
        }
        XCTAssertEqual(error as? CacheMiss, expected, file: file, line: line)
    }
}
