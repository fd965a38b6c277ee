import Foundation
import Loading
import XCTest

/// Where a store's fetches start, and with whose task-local values: the caller's that started the fetch (also for the
/// callers that join it, and after it is cancelled), none, or the app's own.
final class FetchContextTests: XCTestCase {
    func test_byDefault_aSharedFetchCarriesTheFirstCallersContext_evenAfterItIsCancelled() async throws {
        let upstream = ContextRecordingUpstream()
        let store = Store(levels: [], fetch: LoaderFamily { (_: String) in upstream })

        let first = Request.$id.withValue("first") { store.read("a").load { _ in } }
        let second = Locked<Result<StoreResponse<String>, any Error>?>(nil)
        _ = Request.$id.withValue("second") { store.read("a").load { result in second.withLock { $0 = result } } }
        first.cancel()
        upstream.answerAll(with: "v")

        XCTAssertEqual(upstream.contexts, ["first"], "one fetch, started in the first caller's task")
        XCTAssertEqual(try second.withLock { $0 }?.get().value, "v", "the second caller got its answer")
    }

    func test_detached_startsEachFetchOutsideEveryCallersTask() async throws {
        let upstream = ContextRecordingUpstream(answersAtOnce: true)
        let store = Store(levels: [], fetch: LoaderFamily { (_: String) in upstream }, fetchContext: .detached)

        let response = try await Request.$id.withValue("caller") { try await store.read("a").load() }

        XCTAssertEqual(response.value, "v")
        XCTAssertEqual(upstream.contexts, [nil])
    }

    func test_custom_startsEachFetchInTheContextTheAppGives() async throws {
        let upstream = ContextRecordingUpstream(answersAtOnce: true)
        let store = Store(
            levels: [], fetch: LoaderFamily { (_: String) in upstream },
            fetchContext: .custom { start in Request.$id.withValue("the fetch's own") { start() } })

        _ = try await Request.$id.withValue("caller") { try await store.read("a").load() }

        XCTAssertEqual(upstream.contexts, ["the fetch's own"])
    }

    func test_aFetchCancelledBeforeItsContextStartsIt_neverStarts() {
        let upstream = ContextRecordingUpstream(answersAtOnce: true)
        let held = Locked<[@Sendable () -> Void]>([])
        let store = Store(
            levels: [], fetch: LoaderFamily { (_: String) in upstream },
            fetchContext: .custom { start in held.withLock { $0.append(start) } })

        let read = store.read("a").load { _ in XCTFail("a cancelled load never completes") }
        read.cancel()
        for start in held.withLock({ $0 }) { start() }

        XCTAssertEqual(held.withLock { $0.count }, 1)
        XCTAssertEqual(upstream.contexts, [], "the upstream load never started")
    }

    func test_aFetchNoCallerWaitsFor_endsAsCancelledInTheEvents() {
        let ended = Locked<[(any Error)?]>([])
        let store = Store(
            levels: [], fetch: LoaderFamily { (_: String) in ContextRecordingUpstream() },
            events: { event in
                if case .fetchEnded(_, _, _, let error) = event { ended.withLock { $0.append(error) } }
            })

        store.read("a").load { _ in }.cancel()

        XCTAssertEqual(ended.withLock { $0.count }, 1)
        XCTAssertTrue(ended.withLock { $0.first } as? CancellationError != nil)
    }
}

/// The request a caller works for.
private enum Request {
    @TaskLocal static var id: String?
}

/// An upstream that records the request id each load starts with, and answers at once or when told.
private final class ContextRecordingUpstream: Loader, Sendable {
    private let state = Locked<(contexts: [String?], waiting: [LoadCompletion<String>])>(([], []))
    private let answersAtOnce: Bool

    init(answersAtOnce: Bool = false) {
        self.answersAtOnce = answersAtOnce
    }

    var contexts: [String?] { state.withLock { $0.contexts } }

    func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
        state.withLock { $0.contexts.append(Request.id) }
        if answersAtOnce {
            completion(.success("v"))
        } else {
            state.withLock { $0.waiting.append(completion) }
        }
        return Nothing()
    }

    func answerAll(with value: String) {
        for completion in state.withLock({ exchange(&$0.waiting, with: []) }) { completion(.success(value)) }
    }
}

/// A token with nothing to cancel.
private struct Nothing: CancellationToken {
    func cancel() {}
}
