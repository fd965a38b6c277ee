import Foundation
import XCTest

@testable import Loading

/// What a thread tells a store's start of an upstream load: whether the fetch ended before the start returned (its
/// token then needs no keeping), for that fetch of that store alone, and on that thread alone.
final class RunningHereTests: XCTestCase {
    private final class SomeStore: Sendable {}

    func test_aFetchThatEndsWhileItsLoadStarts_isToldToTheStart() {
        let store = SomeStore()
        let (result, ended) = RunningHere.current.start(fetch: 1, of: store) { () -> String in
            RunningHere.made?.fetchEnded(1, of: store)
            return "token"
        }

        XCTAssertEqual(result, "token")
        XCTAssertTrue(ended)
    }

    func test_anotherFetch_orTheSameFetchOfAnotherStore_isNotToldToTheStart() {
        let (store, other) = (SomeStore(), SomeStore())
        let (_, ended) = RunningHere.current.start(fetch: 1, of: store) {
            RunningHere.made?.fetchEnded(2, of: store)
            RunningHere.made?.fetchEnded(1, of: other)
        }

        XCTAssertFalse(ended)
    }

    func test_startsInsideStarts_areToldApart() {
        let store = SomeStore()
        var inner: Bool?
        let (_, outer) = RunningHere.current.start(fetch: 1, of: store) {
            // The outer fetch's answer starts another load (a reader's completion reading another key).
            RunningHere.made?.fetchEnded(1, of: store)
            inner = RunningHere.current.start(fetch: 2, of: store) {}.ended
        }

        XCTAssertTrue(outer)
        XCTAssertEqual(inner, false)
    }

    func test_aFetchThatEndsOnAnotherThread_isNotToldToTheStart() {
        let store = SomeStore()
        let (_, ended) = RunningHere.current.start(fetch: 1, of: store) {
            let done = DispatchSemaphore(value: 0)
            Thread {
                RunningHere.made?.fetchEnded(1, of: store)
                done.signal()
            }
            .start()
            done.wait()
        }

        XCTAssertFalse(ended, "the start cannot know: the store keeps the token, as for a load answering later")
    }

    func test_aFetchThatEndedAfterItsStartReturned_isNotToldToALaterStart() {
        let store = SomeStore()
        _ = RunningHere.current.start(fetch: 1, of: store) {}
        RunningHere.made?.fetchEnded(1, of: store)

        let (_, ended) = RunningHere.current.start(fetch: 2, of: store) {}

        XCTAssertFalse(ended)
    }

    func test_aStoreKeepsTheTokenOfALoadStillRunning_andDropsThatOfALoadThatAnswered() {
        let upstream = TokenCountingUpstream()
        let store = Store<String, String>(levels: [], fetch: LoaderFamily { key in upstream.loader(for: key) })

        let answered = Locked<String?>(nil)
        let atOnce = store.read("at once").load { result in answered.withLock { $0 = try? result.get().value } }
        atOnce.cancel()
        XCTAssertEqual(answered.withLock { $0 }, "at once")
        XCTAssertEqual(upstream.cancels, 0, "a load that answered is not cancelled")

        let later = store.read("later").load { _ in XCTFail("a cancelled load never completes") }
        later.cancel()
        XCTAssertEqual(upstream.cancels, 1, "the last caller out cancels the load still running")
        upstream.answerHeld()
    }
}

/// An upstream whose loads of "at once" answer before they return; the others wait for ``answerHeld()``. It counts
/// the cancels of its loads' tokens.
private final class TokenCountingUpstream: Sendable {
    private let state = Locked<(cancels: Int, held: [@Sendable () -> Void])>((0, []))

    var cancels: Int { state.withLock { $0.cancels } }

    func answerHeld() {
        for answer in state.withLock({ exchange(&$0.held, with: []) }) { answer() }
    }

    func loader(for key: String) -> some Loader<String> {
        CountedLoad(key: key, upstream: self)
    }

    fileprivate func hold(_ answer: @escaping @Sendable () -> Void) {
        state.withLock { $0.held.append(answer) }
    }

    fileprivate func cancelled() {
        state.withLock { $0.cancels += 1 }
    }

    private struct CountedLoad: Loader {
        let key: String
        let upstream: TokenCountingUpstream

        func load(completion: @escaping LoadCompletion<String>) -> any CancellationToken {
            if key == "at once" { completion(.success(key)) } else { upstream.hold { completion(.success(key)) } }
            return AnyCancellationToken { [upstream] in upstream.cancelled() }
        }
    }
}
