import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// What reaches a debounced level when: bursts of changes wait for the timer or a flush; what the store learns from
/// the network or a confirmed commit is saved at once, and answered once saved.
final class StoreSavingTests: XCTestCase {
    private let now = Date(timeIntervalSinceReferenceDate: 1_000)

    func test_aFetchedValue_isSavedToTheDebouncedLevelAtOnce_andTheReadAnswersOnceItIsSaved() {
        let sut = makeSUT()
        sut.disk.holdSaves = true
        let answer = Locked<String?>(nil)

        let token = sut.store.read("a").load { result in answer.withLock { $0 = try? result.get().value } }
        sut.network.complete("a", with: "fetched")

        XCTAssertEqual(sut.memory.values["a"], "fetched")
        XCTAssertNil(answer.withLock { $0 }, "not answered before the database has saved it")
        sut.disk.releaseSaves()
        XCTAssertEqual(sut.disk.values["a"], "fetched", "saved without waiting for the debounce")
        XCTAssertEqual(answer.withLock { $0 }, "fetched")
        sut.scheduler.advance(by: .seconds(1))
        XCTAssertEqual(sut.disk.saves, 1, "and no debounced write follows")
        token.cancel()
    }

    func test_aFetchedValue_answersTheRead_onlyOnceEveryLevelSavedIt_whicheverLandsLast() {
        for memoryLandsFirst in [true, false] {
            let (memory, disk) = (SpyCache(now: { [now] in now }), SpyCache(now: { [now] in now }))
            let network = KeyedLoaderSpy<String, String>()
            let store = Store(
                levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
                fetch: LoaderFamily { network[$0] }, now: { [now] in now })
            memory.holdSaves = true
            disk.holdSaves = true
            let answer = Locked<String?>(nil)

            let token = store.read("a").load { result in answer.withLock { $0 = try? result.get().value } }
            network.complete("a", with: "fetched")
            let (first, last) = memoryLandsFirst ? (memory, disk) : (disk, memory)
            first.releaseSaves()

            XCTAssertNil(answer.withLock { $0 }, "not answered while a level has not saved it")
            last.releaseSaves()
            XCTAssertEqual(answer.withLock { $0 }, "fetched")
            XCTAssertEqual(memory.values["a"], "fetched")
            XCTAssertEqual(disk.values["a"], "fetched")
            token.cancel()
        }
    }

    func test_aFetchedValue_replacesADebouncedWriteWaiting() {
        let sut = makeSUT()
        sut.store.write("local", for: "a")

        sut.store.freshValue(of: "a").load { _ in }.cancelAfterTest(self)
        sut.network.complete("a", with: "server")
        sut.scheduler.advance(by: .seconds(1))

        XCTAssertEqual(sut.disk.values["a"], "server")
        XCTAssertEqual(sut.disk.saves, 1, "the burst's write was replaced, not written after the server's value")
    }

    func test_writesAndUpdates_waitForTheDebounce() {
        let sut = makeSUT()

        sut.store.write("1", for: "a")
        sut.store.update("a") { $0.map { $0 + "2" } }

        XCTAssertEqual(sut.memory.values["a"], "12")
        XCTAssertNil(sut.disk.values["a"])
        sut.scheduler.advance(by: .milliseconds(500))
        XCTAssertEqual(sut.disk.values["a"], "12")
        XCTAssertEqual(sut.disk.saves, 1)
    }

    func test_flush_savesTheBurstNow_andCompletesOnceItIsSaved() {
        let sut = makeSUT()
        sut.store.write("1", for: "a")
        sut.store.write("x", for: "b")
        sut.disk.holdSaves = true
        let flushed = Locked(false)

        sut.store.flush { flushed.withLock { $0 = true } }

        XCTAssertFalse(flushed.withLock { $0 }, "the writes are issued, not done")
        sut.disk.releaseSaves()
        XCTAssertEqual(sut.disk.values, ["a": "1", "b": "x"])
        XCTAssertTrue(flushed.withLock { $0 })
        sut.scheduler.advance(by: .seconds(1))
        XCTAssertEqual(sut.disk.saves, 2, "the timers were cancelled: nothing is written twice")
    }

    func test_flush_fromTheAppsLifecycleHook() {
        let sut = makeSUT()
        let store = sut.store
        store.update("a") { _ in "edited" }

        // Sample: begin
        // When the app goes to the background:
        store.flush()
        // Sample: end

        XCTAssertEqual(sut.disk.values["a"], "edited")
    }

    func test_flush_withNothingWaiting_completesAtOnce() {
        let sut = makeSUT()
        let flushed = Locked(false)

        sut.store.flush { flushed.withLock { $0 = true } }

        XCTAssertTrue(flushed.withLock { $0 })
    }

    func test_aConfirmedOptimisticChange_isSavedAtOnce_andItsCompletionWaitsForTheSave() {
        let sut = makeSUT()
        sut.store.write("a", for: "list")
        sut.scheduler.advance(by: .seconds(1))
        let commit = LoaderSpy<Void>()
        let outcome = Locked<Result<Void, any Error>?>(nil)
        sut.disk.holdSaves = true

        sut.store.mutate(
            "list", { $0.map { $0 + "+edit" } }, commit: commit,
            completion: { result in outcome.withLock { $0 = result } })
        commit.complete(with: ())

        XCTAssertNil(outcome.withLock { $0 }, "not reported before the database has it")
        sut.disk.releaseSaves()
        XCTAssertEqual(sut.disk.values["list"], "a+edit")
        XCTAssertNotNil(try outcome.withLock { $0 }?.get())
    }

    func test_aRefusedOptimisticChange_completesAtOnce_withTheRefusal() {
        let sut = makeSUT()
        sut.store.write("a", for: "list")
        let commit = LoaderSpy<Void>()
        let outcome = Locked<Result<Void, any Error>?>(nil)
        sut.disk.holdSaves = true

        sut.store.mutate(
            "list", { $0.map { $0 + "+edit" } }, commit: commit,
            completion: { result in outcome.withLock { $0 = result } })
        commit.fail(with: URLError(.notConnectedToInternet))

        XCTAssertThrowsError(try outcome.withLock { $0 }?.get())
    }

    func test_aClearWhileAFetchedValueIsBeingSaved_stillAnswersTheRead() {
        let sut = makeSUT()
        sut.disk.holdSaves = true
        let answered = Locked(false)
        let token = sut.store.read("a").load { _ in answered.withLock { $0 = true } }
        sut.network.complete("a", with: "fetched")

        sut.store.clear()
        sut.disk.releaseSaves()

        XCTAssertTrue(answered.withLock { $0 }, "a read is never left without an answer")
        token.cancel()
    }

    // MARK: Turns

    func test_aReadAskedFromAnAnswer_findsTheKeyIdle_andReadsTheLevels() {
        let clock = Locked(now)
        let memory = SpyCache(now: { clock.withLock { $0 } })
        memory.values = ["a": "cached"]
        let network = KeyedLoaderSpy<String, String>()
        let store = Store(
            levels: [.cache(memory, name: "memory")], fetch: LoaderFamily { network[$0] }, keptValues: 1,
            now: { clock.withLock { $0 } })
        let readsFromTheAnswer = Locked<Int?>(nil)

        let token = store.read("a").load { _ in
            // The hit's change is over: its turn must be too, or this read would not ask the level.
            clock.withLock { $0 += 120 }
            let before = memory.reads
            _ = store.read("a", policy: .cacheFirst(maxAge: .seconds(60))).load { _ in }
            readsFromTheAnswer.withLock { $0 = memory.reads - before }
        }

        XCTAssertEqual(readsFromTheAnswer.withLock { $0 }, 1, "the level was read for the second read")
        token.cancel()
    }

    func test_writesSpacedPastTheDebounce_toALevelStillSaving_doNotPileUp_theLatestIsSavedOnceItLands() {
        let sut = makeSUT()
        sut.disk.holdSaves = true  // a slow database
        for version in 1...10 {
            sut.store.write("v\(version)", for: "a")
            sut.scheduler.advance(by: .milliseconds(500))  // each debounce ends while the first save is on its way
        }
        XCTAssertEqual(sut.disk.heldSaveCount, 1, "one save on its way; the later values wait, the latest kept")

        sut.disk.releaseSaves()

        XCTAssertEqual(sut.disk.saves, 2, "the first, then the latest: none of the values in between")
        XCTAssertEqual(sut.disk.values["a"], "v10")
    }

    // MARK: - Helpers

    private struct SUT {
        let store: Store<String, String>
        let memory: SpyCache
        let disk: SpyCache
        let network: KeyedLoaderSpy<String, String>
        let scheduler: TestScheduler
    }

    private func makeSUT() -> SUT {
        let now = now
        let (memory, disk) = (SpyCache(now: { now }), SpyCache(now: { now }))
        let network = KeyedLoaderSpy<String, String>()
        let scheduler = TestScheduler()
        let store = Store(
            levels: [
                .cache(memory, name: "memory"),
                .cache(disk, name: "disk", debouncingWritesFor: .milliseconds(500), scheduler: scheduler),
            ],
            fetch: LoaderFamily { network[$0] },
            now: { now })
        return SUT(store: store, memory: memory, disk: disk, network: network, scheduler: scheduler)
    }
}

extension CancellationToken {
    /// Keeps the load going until the test ends.
    fileprivate func cancelAfterTest(_ test: XCTestCase) {
        test.addTeardownBlock { self.cancel() }
    }
}
