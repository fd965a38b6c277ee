import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

struct TestError: Error, Equatable {
    var id = 0
}

let anyError = TestError(id: 0)

/// An in-memory cache that is also a loader of what it holds: the simplest honest `Cache`.
final class InMemoryCache<Value: Sendable>: Cache, Loader {
    private let stored = Locked<Value?>(nil)

    init(_ value: Value? = nil) {
        stored.withLock { $0 = value }
    }

    var value: Value? { stored.withLock { $0 } }

    func save(_ value: Value, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        stored.withLock { $0 = value }
        completion(.success(()))
    }

    @discardableResult
    func load(completion: @escaping LoadCompletion<Value>) -> any CancellationToken {
        completion(stored.withLock { $0 }.map { .success($0) } ?? .failure(TestError(id: -1)))
        return AnyCancellationToken {}
    }
}

func assertError<E: Error & Equatable>(
    _ result: Result<some Any, any Error>?,
    _ expected: E,
    file: StaticString = #filePath,
    line: UInt = #line
) {
    guard case .failure(let error) = result else {
        return XCTFail("expected failure \(expected), got \(String(describing: result))", file: file, line: line)
    }
    XCTAssertEqual(error as? E, expected, file: file, line: line)
}

/// An object a test watches for release.
final class LeakMarker: Sendable {
    func touch() {}
}

extension XCTestCase {
    /// A completion holding an object that must be released by the end of the test: how a test asserts that a
    /// load keeps nothing alive (its completion included) once it completed or was cancelled.
    func completionTrackedForLeaks<T>(file: StaticString = #filePath, line: UInt = #line) -> LoadCompletion<T> {
        let marker = LeakMarker()
        trackForMemoryLeaks(marker, file: file, line: line)
        return { _ in marker.touch() }
    }

    /// The response a store's read answers, waited for under a watchdog (`nil` when it failed).
    func awaitResponse<Value: Sendable>(_ read: AnyLoader<StoreResponse<Value>>) -> StoreResponse<Value>? {
        let response = Locked<StoreResponse<Value>?>(nil)
        let done = expectation(description: "answered")
        read.load { result in
            response.withLock { $0 = try? result.get() }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return response.withLock { $0 }
    }
}

/// A clock a test moves by hand.
struct ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let current = Locked(Instant(offset: .zero))

    var now: Instant { current.withLock { $0 } }
    var minimumResolution: Duration { .zero }

    func advance(by duration: Duration) {
        current.withLock { $0 = $0.advanced(by: duration) }
    }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        advance(by: now.duration(to: deadline))
    }
}

extension XCTestCase {
    /// A new empty folder in the temporary directory, named `prefix` and a UUID, removed when the test ends.
    func makeTemporaryFolder(_ prefix: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return folder
    }
}
