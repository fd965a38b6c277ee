import Loading

/// A loader for tests whose loads wait until the test completes, fails or observes them, one by one.
///
/// ```swift
/// let primary = LoaderSpy<[String]>()
/// let secondary = LoaderSpy<[String]>()
/// let recorder = LoadRecorder<[String]>()
/// let token = recorder.load(primary.fallback(to: secondary))
/// primary.fail(with: URLError(.notConnectedToInternet))  // the first request fails...
/// XCTAssertEqual(secondary.loadCount, 1)                 // ...so the fallback starts
/// token.cancel()
/// XCTAssertEqual(secondary.cancelledRequests, [0])
/// XCTAssertEqual(recorder.count, 0)
/// ```
/// Completing a request that was cancelled does nothing, like a real loader that keeps the contract.
public final class LoaderSpy<Output: Sendable>: Loader {
    private struct Request: Sendable {
        var completion: LoadCompletion<Output>?
        var isCancelled = false
    }

    private let requests = Locked<[Request]>([])

    /// Creates a spy with no requests.
    public init() {}

    /// How many loads have been started.
    public var loadCount: Int {
        requests.withLock { $0.count }
    }

    /// The indexes of the requests that were cancelled while pending.
    public var cancelledRequests: [Int] {
        requests.withLock { requests in requests.indices.filter { requests[$0].isCancelled } }
    }

    /// The indexes of the requests still waiting for an outcome.
    public var pendingRequests: [Int] {
        requests.withLock { requests in requests.indices.filter { requests[$0].completion != nil } }
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let index = requests.withLock { requests in
            requests.append(Request(completion: completion))
            return requests.count - 1
        }
        return AnyCancellationToken { [requests] in
            let dropped = requests.withLock { requests -> LoadCompletion<Output>? in
                guard requests[index].completion != nil else { return nil }
                requests[index].isCancelled = true
                return requests[index].completion.take()
            }
            withExtendedLifetime(dropped) {}  // released after unlocking, as the library does
        }
    }

    /// Completes request `index` (the last one by default) with `value`.
    public func complete(with value: Output, at index: Int? = nil) {
        finish(.success(value), at: index)
    }

    /// Fails request `index` (the last one by default) with `error`.
    public func fail(with error: any Error, at index: Int? = nil) {
        finish(.failure(error), at: index)
    }

    private func finish(_ result: Result<Output, any Error>, at index: Int?) {
        let completion = requests.withLock { requests -> LoadCompletion<Output>? in
            let index = index ?? requests.count - 1
            guard requests.indices.contains(index) else { return nil }
            defer { requests[index].completion = nil }
            return requests[index].completion
        }
        completion?(result)
    }
}

/// A cache for tests that records what it is asked to save and completes each save when the test says.
public final class CacheSpy<Value: Sendable>: Cache {
    private struct Save: Sendable {
        var value: Value
        var completion: (@Sendable (Result<Void, any Error>) -> Void)?
    }

    private let saves = Locked<[Save]>([])
    private let completesImmediately: Result<Void, any Error>?

    /// Creates a spy. With `result`, every save completes at once with it; with `nil`, saves wait for
    /// ``completeSave(with:at:)``.
    public init(completingWith result: Result<Void, any Error>? = .success(())) {
        completesImmediately = result
    }

    /// Every value saved so far, in order.
    public var savedValues: [Value] {
        saves.withLock { $0.map(\.value) }
    }

    public func save(_ value: Value, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        saves.withLock { $0.append(Save(value: value, completion: completesImmediately == nil ? completion : nil)) }
        if let completesImmediately { completion(completesImmediately) }
    }

    /// Completes save `index` (the last one by default) with `result`.
    public func completeSave(with result: Result<Void, any Error>, at index: Int? = nil) {
        let completion = saves.withLock { saves -> (@Sendable (Result<Void, any Error>) -> Void)? in
            let index = index ?? saves.count - 1
            guard saves.indices.contains(index) else { return nil }
            defer { saves[index].completion = nil }
            return saves[index].completion
        }
        completion?(result)
    }
}
