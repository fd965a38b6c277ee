import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A level saving in the background: a fetch's callers are answered before its save lands; within the store nothing
/// else changes, and everything but a fetch's answer still waits for it.
final class BackgroundSaveTests: XCTestCase {
    func test_aFetchsCallers_areAnsweredWhileTheSharedLevelsSaveIsStillUnderWay() {
        let sharedTable = SharedTable()
        sharedTable.holdSaves()  // a database that does not answer its saves
        let api = QuoteAPI()
        // Sample: begin
        let store = Store(
            levels: [
                .cache(MemoryCache(), name: "memory"),
                .cache(sharedTable, name: "shared", timeout: .seconds(1)).savingInBackground(),
            ],
            fetch: LoaderFamily { (symbol: String) in api.quote(symbol) })
        // Sample: end

        let answer = awaitResponse(store.read("ACME"))

        XCTAssertEqual(answer?.value, "quote ACME")
        XCTAssertEqual(sharedTable.saves, 0, "answered before the save landed")
        sharedTable.releaseSaves()
        XCTAssertTrue(eventually { sharedTable.saves == 1 }, "saved after")
    }

    func test_withoutIt_theCallersWaitForTheSave() {
        let sharedTable = SharedTable()
        sharedTable.holdSaves()
        let api = QuoteAPI()
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedTable, name: "shared")],
            fetch: LoaderFamily { (symbol: String) in api.quote(symbol) })
        let answered = Locked<String?>(nil)

        store.read("ACME").load { result in answered.withLock { $0 = try? result.get().value } }
        XCTAssertTrue(eventually { sharedTable.savesStarted == 1 })
        XCTAssertNil(answered.withLock { $0 }, "the answer waits for the save")
        sharedTable.releaseSaves()

        XCTAssertTrue(eventually { answered.withLock { $0 } == "quote ACME" })
    }

    func test_theStoreKeepsTheValueUntilTheSaveLands_andNeverServesTheLevelsOlderOne() {
        let sharedTable = SharedTable()
        sharedTable.put("old quote", for: "ACME", savedAt: .distantPast)
        sharedTable.holdSaves()
        let api = QuoteAPI()
        let store = Store(
            levels: [.cache(sharedTable, name: "shared").savingInBackground()],
            fetch: LoaderFamily { (symbol: String) in api.quote(symbol) })

        let fetched = awaitResponse(store.read("ACME", policy: .networkOnly))
        let readAgain = awaitResponse(store.read("ACME"))

        XCTAssertEqual(fetched?.value, "quote ACME")
        XCTAssertEqual(readAgain?.value, "quote ACME", "what the store holds, not the level's older value")
        XCTAssertEqual(api.calls, 1)
        sharedTable.releaseSaves()
        XCTAssertTrue(eventually { sharedTable.saves == 1 })
    }

    func test_aFailedSave_isReportedAfterTheAnswer() {
        let sharedTable = SharedTable()
        sharedTable.holdSaves()
        sharedTable.failSaves(with: URLError(.timedOut))
        let failures = Locked<[String]>([])
        let api = QuoteAPI()
        let store = Store(
            levels: [.cache(sharedTable, name: "shared").savingInBackground()],
            fetch: LoaderFamily { (symbol: String) in api.quote(symbol) },
            onWriteFailure: { error in failures.withLock { $0.append("\(error)") } })

        XCTAssertEqual(awaitResponse(store.read("ACME"))?.value, "quote ACME")
        XCTAssertEqual(failures.withLock { $0 }, [], "not reported yet: the save is under way")
        sharedTable.releaseSaves()

        XCTAssertTrue(eventually { failures.withLock { $0.count } == 1 }, "reported once it failed")
    }

    func test_aWrite_stillWaitsForTheLevel_asAFlushDoes() {
        let sharedTable = SharedTable()
        let store = Store(
            levels: [.cache(sharedTable, name: "shared").savingInBackground()],
            fetch: LoaderFamily { (symbol: String) in QuoteAPI().quote(symbol) })
        sharedTable.holdSaves()
        let flushed = Locked(false)

        store.write("edited", for: "ACME")
        store.flush { flushed.withLock { $0 = true } }
        XCTAssertTrue(eventually { sharedTable.savesStarted == 1 })
        XCTAssertFalse(flushed.withLock { $0 }, "the flush waits for the write's save")
        sharedTable.releaseSaves()

        XCTAssertTrue(eventually { flushed.withLock { $0 } })
        XCTAssertEqual(sharedTable.saves, 1)
    }

    func test_anInstanceWaitingForTheLease_findsTheValueOnceTheBackgroundSaveLanded() {
        let sharedTable = SharedTable()
        let lease = MemoryLease(savesOf: sharedTable)
        let api = QuoteAPI()
        let instances = (0..<2).map { _ in
            Store(
                levels: [.cache(sharedTable, name: "shared").savingInBackground()],
                fetch: LoaderFamily { (symbol: String) in api.quote(symbol) },
                coordination: .lease(lease, sharedLevel: "shared", waiting: .watchdog * 2, polling: .milliseconds(5)))
        }
        sharedTable.holdSaves()

        XCTAssertEqual(awaitResponse(instances[0].read("ACME"))?.value, "quote ACME")
        XCTAssertTrue(lease.isHeld("ACME"), "held until the save lands")
        let second = Locked<StoreResponse<String>?>(nil)
        instances[1].read("ACME").load { result in second.withLock { $0 = try? result.get() } }
        sharedTable.releaseSaves()

        XCTAssertTrue(eventually { second.withLock { $0 } != nil })
        XCTAssertEqual(second.withLock { $0?.origin }, .cache("shared"), "found in the shared level")
        XCTAssertEqual(api.calls, 1)
        // The second instance may also take the lease given back, then find the value: it fetches nothing either way.
        XCTAssertEqual(lease.log.prefix(2), ["acquired ACME", "released ACME after 1 save"], "given back once saved")
    }

}

/// A quotes API answering at once, counting its calls.
private final class QuoteAPI: Sendable {
    private let count = Locked(0)

    var calls: Int { count.withLock { $0 } }

    func quote(_ symbol: String) -> AnyLoader<String> {
        AnyLoader { [count] completion in
            count.withLock { $0 += 1 }
            completion(.success("quote \(symbol)"))
            return AnyCancellationToken {}
        }
    }
}
