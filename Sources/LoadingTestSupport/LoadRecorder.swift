import Loading

/// Records every result a loader delivers, so that a test can start loads and assert on what came back, from any
/// thread, under Swift 6's strict concurrency checking.
///
/// ```swift
/// let recorder = LoadRecorder<[Friend]>()
/// let token = recorder.load(friendsLoader)
/// spy.complete(with: [ada])
/// XCTAssertEqual(recorder.values, [[ada]])
/// ```
public final class LoadRecorder<Output: Sendable>: Sendable {
    private let results = Locked<[Result<Output, any Error>]>([])

    /// Creates a recorder with no results.
    public init() {}

    /// Every result delivered so far, in order.
    public var all: [Result<Output, any Error>] { results.withLock { $0 } }

    /// How many results were delivered.
    public var count: Int { results.withLock { $0.count } }

    /// The values of the successful results, in order.
    public var values: [Output] {
        all.compactMap { try? $0.get() }
    }

    /// The errors of the failed results, in order.
    public var errors: [any Error] {
        all.compactMap {
            if case .failure(let error) = $0 { return error }
            return nil
        }
    }

    /// Records `result`: pass this as a load's completion.
    @Sendable
    public func record(_ result: Result<Output, any Error>) {
        results.withLock { $0.append(result) }
    }

    /// Starts a load of `loader` whose results this recorder keeps, and returns its token.
    @discardableResult
    public func load<L: Loader>(_ loader: L) -> any CancellationToken where L.Output == Output {
        loader.load { self.record($0) }
    }
}
