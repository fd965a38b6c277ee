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

    /// A write asked while another thread is still sending the key's earlier write to the levels is sent by that
    /// thread, after it returned: a flush asked after it still waits for it.
    func test_aFlush_waitsForAWriteAskedBeforeIt_thatAnotherThreadSendsToTheLevels() {
        let first = GatedCache(holding: "a")
        let second = GatedCache(holding: nil)
        let store = Store(
            levels: [.cache(first, name: "first"), .cache(second, name: "second")],
            fetch: LoaderFamily { (_: String) in LoaderSpy<String>() })
        let flushed = Locked(false)
        second.onSave = { value in
            if value == "b" { XCTAssertFalse(flushed.withLock { $0 }, "the flush ended before b was sent") }
        }
        DispatchQueue.global().async { store.write("a", for: "k") }
        first.waitUntilHeld()  // the first write is being sent, on the other thread

        store.write("b", for: "k")
        let done = expectation(description: "flushed")
        store.flush {
            flushed.withLock { $0 = true }
            done.fulfill()
        }
        first.release()
        wait(for: [done], timeout: .watchdog)

        XCTAssertEqual(second.values, ["k": "b"])
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

/// A level that saves at once, on the caller's thread, but holds the thread saving `held` until ``release()``.
private final class GatedCache: KeyedCache {
    private let held: String?
    private let entered = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    private let saved = Locked<[String: String]>([:])
    private let saving = Locked<(@Sendable (String) -> Void)?>(nil)

    init(holding held: String?) { self.held = held }

    var values: [String: String] { saved.withLock { $0 } }

    /// Runs on every save, before it lands.
    var onSave: (@Sendable (String) -> Void)? {
        get { saving.withLock { $0 } }
        set { saving.withLock { $0 = newValue } }
    }

    /// Returns once the held save began (or the watchdog ran out: the test then fails on what follows).
    func waitUntilHeld() { _ = entered.wait(timeout: .now() + .watchdog) }
    func release() { gate.signal() }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        let value = saved.withLock { $0[key] }
        completion(value.map { .success(CachedValue($0, savedAt: Date())) } ?? .failure(CacheMiss.absent))
    }
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        if value == held {
            entered.signal()
            _ = gate.wait(timeout: .now() + .watchdog)
        }
        onSave?(value)
        saved.withLock { $0[key] = value }
        completion(.success(()))
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        saved.withLock { $0[key] = nil }
        completion(.success(()))
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        saved.withLock { $0 = [:] }
        completion(.success(()))
    }
}
