import Dispatch
import Loading
import XCTest

/// The contract every ``Cache`` implementation keeps, as checks a test suite can run against its own cache.
///
/// Give it a factory for a fresh cache together with a loader that reads back what the cache stores, and two
/// distinct sample values:
/// ```swift
/// func test_cacheContract() {
///     CacheContract(sampleValues: ([ada], [grace])) {
///         let store = InMemoryFriendsStore()
///         return (cache: LocalFriendsLoader(store: store), reader: LocalFriendsLoader(store: store))
///     }.verify()
/// }
/// ```
/// The checks: a save completes exactly once, with success; a saved value is what the reader loads; a later save
/// replaces an earlier one; saves from many threads each complete exactly once and leave one of their values.
public struct CacheContract<C: Cache, Reader: Loader> where C.Value == Reader.Output, C.Value: Equatable {
    /// The value type the cache stores.
    public typealias Value = C.Value

    private let makeCache: () -> (cache: C, reader: Reader)
    private let sampleValues: (Value, Value)
    private let timeout: Double

    /// Creates the checks for caches built by `makeCache`, using two different `sampleValues`.
    public init(
        sampleValues: (Value, Value),
        timeout: Double = 5,
        makeCache: @escaping () -> (cache: C, reader: Reader)
    ) {
        self.makeCache = makeCache
        self.sampleValues = sampleValues
        self.timeout = timeout
    }

    /// Runs every check, failing the current test at the caller's line for each broken rule.
    public func verify(file: StaticString = #filePath, line: UInt = #line) {
        assertSaveCompletesOnceWithSuccess(file: file, line: line)
        assertSavedValueIsLoaded(file: file, line: line)
        assertLaterSaveReplacesEarlierOne(file: file, line: line)
        assertConcurrentSavesCompleteOnceEach(file: file, line: line)
    }

    /// A save calls its completion exactly once, with success.
    public func assertSaveCompletesOnceWithSuccess(file: StaticString = #filePath, line: UInt = #line) {
        let (cache, _) = makeCache()
        let results = Locked<[Result<Void, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        cache.save(sampleValues.0) { result in
            results.withLock { $0.append(result) }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else {
            return XCTFail("save did not complete", file: file, line: line)
        }
        // No sleep: a second save through the same cache, awaited, gives a wrong second call of the first
        // completion the time to show.
        save(sampleValues.1, to: cache, file: file, line: line)
        let recorded = results.withLock { $0 }
        XCTAssertEqual(recorded.count, 1, "save must complete exactly once", file: file, line: line)
        if case .failure(let error) = recorded.first {
            XCTFail("save failed: \(error)", file: file, line: line)
        }
    }

    /// After a successful save, the reader loads the saved value.
    public func assertSavedValueIsLoaded(file: StaticString = #filePath, line: UInt = #line) {
        let (cache, reader) = makeCache()
        save(sampleValues.0, to: cache, file: file, line: line)
        XCTAssertEqual(read(reader, file: file, line: line), sampleValues.0, file: file, line: line)
    }

    /// A second save replaces the first value.
    public func assertLaterSaveReplacesEarlierOne(file: StaticString = #filePath, line: UInt = #line) {
        let (cache, reader) = makeCache()
        save(sampleValues.0, to: cache, file: file, line: line)
        save(sampleValues.1, to: cache, file: file, line: line)
        XCTAssertEqual(read(reader, file: file, line: line), sampleValues.1, file: file, line: line)
    }

    /// Saves started from many threads at once each complete exactly once, and the cache ends up holding one of
    /// the saved values.
    public func assertConcurrentSavesCompleteOnceEach(
        count: Int = 50,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        let (cache, reader) = makeCache()
        let completions = Locked([Int](repeating: 0, count: count))
        let group = DispatchGroup()
        let values = sampleValues
        for _ in 0..<count { group.enter() }
        DispatchQueue.concurrentPerform(iterations: count) { index in
            cache.save(index.isMultiple(of: 2) ? values.0 : values.1) { _ in
                completions.withLock { $0[index] += 1 }
                group.leave()
            }
        }
        guard group.wait(timeout: .now() + timeout) == .success else {
            return XCTFail("concurrent saves did not all complete", file: file, line: line)
        }
        XCTAssertEqual(completions.withLock { $0 }, Array(repeating: 1, count: count), file: file, line: line)
        let stored = read(reader, file: file, line: line)
        XCTAssertTrue(stored == values.0 || stored == values.1, "unexpected stored value", file: file, line: line)
    }

    private func save(_ value: Value, to cache: C, file: StaticString, line: UInt) {
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        cache.save(value) { result in
            if case .failure(let error) = result { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }
        if done.wait(timeout: .now() + timeout) != .success {
            XCTFail("save did not complete", file: file, line: line)
        } else if let failure = failure.withLock({ $0 }) {
            XCTFail("save failed: \(failure)", file: file, line: line)
        }
    }

    private func read(_ reader: Reader, file: StaticString, line: UInt) -> Value? {
        let done = DispatchSemaphore(value: 0)
        let loaded = Locked<Result<Value, any Error>?>(nil)
        reader.load { result in
            loaded.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else {
            XCTFail("reader did not complete", file: file, line: line)
            return nil
        }
        switch loaded.withLock({ $0 }) {
        case .success(let value): return value
        case .failure(let error):
            XCTFail("reader failed: \(error)", file: file, line: line)
            return nil
        case nil: return nil
        }
    }
}
