import Loading

/// A ``LoaderSpy`` per key, for testing loader families and stores: `spy[key]` is the spy of that key, created on
/// first use, so a family can be built over it with `LoaderFamily { spy[$0] }`.
///
/// ```swift
/// let network = KeyedLoaderSpy<String, Friend>()
/// let friend = LoaderFamily { network[$0] }.coalesced()
/// let recorder = LoadRecorder<Friend>()
/// recorder.load(friend["u1"])
/// recorder.load(friend["u1"])
/// network.complete("u1", with: ada)
/// XCTAssertEqual(network.loadCount(for: "u1"), 1)
/// ```
public final class KeyedLoaderSpy<Key: Hashable & Sendable, Output: Sendable>: Sendable {
    private let spies = Locked<[Key: LoaderSpy<Output>]>([:])

    /// Creates a spy with no keys yet.
    public init() {}

    /// The spy of `key`.
    public subscript(key: Key) -> LoaderSpy<Output> {
        spies.withLock { spies in
            if let spy = spies[key] { return spy }
            let spy = LoaderSpy<Output>()
            spies[key] = spy
            return spy
        }
    }

    /// Completes the requests of `key` with `value`: request `index`, or every pending one when `index` is `nil`.
    public func complete(_ key: Key, with value: Output, at index: Int? = nil) {
        let spy = self[key]
        for request in index.map({ [$0] }) ?? spy.pendingRequests { spy.complete(with: value, at: request) }
    }

    /// Fails the requests of `key` with `error`: request `index`, or every pending one when `index` is `nil`.
    public func fail(_ key: Key, with error: any Error, at index: Int? = nil) {
        let spy = self[key]
        for request in index.map({ [$0] }) ?? spy.pendingRequests { spy.fail(with: error, at: request) }
    }

    /// How many loads of `key` have been started.
    public func loadCount(for key: Key) -> Int { self[key].loadCount }

    /// How many loads of `key` were cancelled while pending.
    public func cancelledCount(for key: Key) -> Int { self[key].cancelledRequests.count }
}
