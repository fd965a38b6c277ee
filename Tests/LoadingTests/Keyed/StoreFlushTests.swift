import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// `flush(completion:)` as its documentation promises it: once it completes, every change asked before it is in the
/// levels, so a process ended then loses none, whether the level is debounced or written at once but slowly.
final class StoreFlushTests: XCTestCase {
    func test_aFlush_completesOnlyOnceTheWritesOnTheirWayToASlowLevelHaveLanded() {
        let disk = SlowCache()
        let store = Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory"), .cache(disk, name: "disk")],
            fetch: LoaderFamily { (_: String) in LoaderSpy<String>() })
        disk.holdSaves()
        for index in 0..<20 { store.write("v\(index)", for: "k\(index % 3)") }

        let flushed = expectation(description: "flushed")
        let heldWhenFlushed = Locked<[String: String]>([:])
        store.flush {
            heldWhenFlushed.withLock { $0 = disk.saved }
            flushed.fulfill()
        }
        disk.releaseSaves()  // the saves land only after the flush was asked
        wait(for: [flushed], timeout: .watchdog)

        XCTAssertEqual(heldWhenFlushed.withLock { $0 }, ["k0": "v18", "k1": "v19", "k2": "v17"])
    }

    func test_aFlushWithNothingOnItsWay_completesAtOnce() {
        let store = Store(
            levels: [.cache(SlowCache(), name: "disk")], fetch: LoaderFamily { (_: String) in LoaderSpy<String>() })
        let flushed = Locked(false)
        store.flush { flushed.withLock { $0 = true } }
        XCTAssertTrue(flushed.withLock { $0 })
    }
}

/// A level whose saves land later, in order, on its own queue (as a disk or a database does); a test can hold them.
private final class SlowCache: KeyedCache {
    private let queue = DispatchQueue(label: "slow-cache")
    private let values = Locked<[String: String]>([:])
    private let gate = DispatchSemaphore(value: 0)

    var saved: [String: String] { values.withLock { $0 } }

    /// Holds every operation asked from now on until ``releaseSaves()``.
    func holdSaves() {
        queue.async { [gate] in gate.wait() }
    }

    func releaseSaves() { gate.signal() }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        queue.async { [values] in
            let value = values.withLock { $0[key] }
            completion(value.map { .success(CachedValue($0, savedAt: Date())) } ?? .failure(CacheMiss.absent))
        }
    }
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [values] in
            values.withLock { $0[key] = value }
            completion(.success(()))
        }
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [values] in
            values.withLock { $0[key] = nil }
            completion(.success(()))
        }
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [values] in
            values.withLock { $0 = [:] }
            completion(.success(()))
        }
    }
}
