import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A read made from inside a transform of its own key (`update`) never waits for that change, which waits for it: it
/// answers at once with what the key shows, the value the transform is given, whatever the read's policy.
final class StoreReadInsideChangeTests: XCTestCase {
    func test_aReadOfTheKeyFromInsideItsUpdate_answersTheValueBeingChanged_atOnce() {
        for policy: ReadPolicy in [.cacheFirst, .cacheThenNetwork, .networkFirst, .networkOnly, .cacheOnly] {
            // A fetch never answers: a read waiting for it would hang.
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
            store.write(["a"], for: "list")
            let readInside = Locked<Result<StoreResponse<[String]>, any Error>?>(nil)

            store.update("list") { list in
                readInside.withLock { $0 = Self.readWaiting(store, "list", policy: policy) }
                return (list ?? []) + ["b"]
            }

            let answer = readInside.withLock { $0 }
            XCTAssertEqual(try answer?.get().value, ["a"], "\(policy): the value the transform is given")
            XCTAssertEqual(store.state(for: "list").value, ["a", "b"], "\(policy): and the update is applied")
        }
    }

    func test_aReadOfTheKeyFromInsideItsUpdate_whenTheKeyShowsNothing_failsAtOnce() {
        let store = Store<String, [String]>(
            levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })  // a fetch never answers
        let readInside = Locked<Result<StoreResponse<[String]>, any Error>?>(nil)

        store.update("list") { list in
            readInside.withLock { $0 = Self.readWaiting(store, "list", policy: .cacheFirst) }
            return list
        }

        let answer = readInside.withLock { $0 }
        XCTAssertThrowsError(try answer?.get()) { error in
            XCTAssertEqual(error as? StoreError, .changeInProgress)
            XCTAssertEqual(
                error.localizedDescription,
                "The key has no value to read yet: the read was made from inside a change of the key, which is "
                    + "given that value.")
        }
    }

    func test_aReadOfAnotherKeyFromInsideAnUpdate_goesOnAsUsual() {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["x"], for: "other")
        let readInside = Locked<Result<StoreResponse<[String]>, any Error>?>(nil)

        store.write(["a"], for: "list")
        store.update("list") { list in
            readInside.withLock { $0 = Self.readWaiting(store, "other", policy: .cacheFirst) }
            return list
        }

        XCTAssertEqual(try readInside.withLock { $0 }?.get().value, ["x"])
    }

    func test_aReadFromAnotherThread_whileAnUpdateRuns_answersAfterIt() {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a"], for: "list")
        let (inside, goOn) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        DispatchQueue.global().async {
            store.update("list") { list in
                inside.signal()
                goOn.wait()
                return (list ?? []) + ["b"]
            }
        }
        XCTAssertEqual(inside.wait(timeout: .now() + .watchdog), .success)

        let answer = Locked<[String]?>(nil)
        let answered = expectation(description: "the read answers")
        _ = store.read("list").load { result in
            answer.withLock { $0 = try? result.get().value }
            answered.fulfill()
        }
        XCTAssertNil(answer.withLock { $0 }, "a read from elsewhere waits for the change asked before it")
        goOn.signal()

        wait(for: [answered], timeout: .watchdog)
        XCTAssertEqual(answer.withLock { $0 }, ["a", "b"], "and sees what it made")
    }

    /// Reads `key` and waits for the answer, as code inside a transform might; `nil` when none came within the
    /// watchdog.
    private static func readWaiting(
        _ store: Store<String, [String]>, _ key: String, policy: ReadPolicy
    ) -> Result<StoreResponse<[String]>, any Error>? {
        let answer = Locked<Result<StoreResponse<[String]>, any Error>?>(nil)
        let answered = DispatchSemaphore(value: 0)
        let token = store.read(key, policy: policy).load { result in
            answer.withLock { $0 = result }
            answered.signal()
        }
        guard answered.wait(timeout: .now() + .watchdog) == .success else {
            token.cancel()
            return nil
        }
        return answer.withLock { $0 }
    }
}
