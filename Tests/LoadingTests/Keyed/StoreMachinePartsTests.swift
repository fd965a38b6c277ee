import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// The store machine's parts on their own, with no store, thread or level: kept values, refreshed keys, invalidation
/// records, level issuing and saves, staleness and what state observers were shown.
final class StoreMachinePartsTests: XCTestCase {
    private typealias KeyRecord = StoreMachine.KeyRecord

    private var entries = StoreMachine.EntryTable()
    private var kept = StoreMachine.KeptValues()

    @discardableResult
    private func keep(_ key: Int, stamp: Int) -> KeyRecord {
        let record = entries.record(at: key) ?? KeyRecord(key: key, generation: 0)
        entries[key] = .kept(record)
        kept.keep(record, key: key, stamp: stamp)
        return record
    }

    private func letGo(beyond bound: Int) -> [Int] {
        var taken: [Int] = []
        while let key = kept.takeOldest(beyond: bound, of: entries) {
            XCTAssertNil(entries.record(at: key)?.keptStamp, "it no longer counts")
            taken.append(key)
        }
        return taken
    }

    func test_confirmedValue_isKnownFromItsFirstValue_countsEachValue_andReturnsTheOneReplaced() {
        var confirmed = StoreMachine.ConfirmedValue()
        XCTAssertFalse(confirmed.isKnown, "the levels hold the truth")
        XCTAssertNil(confirmed.value)
        let first = StoredValue<StoreMachine.Value>(value: ValueBox(1), origin: .network, savedAt: date(10))
        XCTAssertNil(confirmed.set(first))
        XCTAssertTrue(confirmed.isKnown)
        XCTAssertEqual(confirmed.version, 1)

        let replaced = confirmed.set(nil)  // a removal
        XCTAssertEqual((replaced?.value as? ValueBox<Int>)?.value, 1, "handed back, to release after unlocking")
        XCTAssertTrue(confirmed.isKnown, "known to have no value")
        XCTAssertNil(confirmed.value)
        XCTAssertEqual(confirmed.version, 2, "a removal is a version too")
    }

    func test_confirmedValue_sharesItsHitResponse_untilTheValueOrWhatTheKeyShowsChanges() {
        var confirmed = StoreMachine.ConfirmedValue()
        var released: (any AnyObject & Sendable)?
        XCTAssertNil(confirmed.makeHit(shown: 1, released: &released), "no value, no response")
        _ = confirmed.set(StoredValue(value: ValueBox(1), origin: .network, savedAt: date(10)))
        XCTAssertNil(confirmed.sharedHit(shown: 5), "none made yet")

        let first = confirmed.makeHit(shown: 5, released: &released)!
        XCTAssertNil(released)
        XCTAssertTrue(confirmed.sharedHit(shown: 5)?.storage === first.storage, "shared")
        XCTAssertNil(confirmed.sharedHit(shown: 6), "the key shows a newer version")

        let shownAnew = confirmed.makeHit(shown: 6, released: &released)!
        XCTAssertEqual(shownAnew.version, 6)
        XCTAssertTrue(released === first.storage, "the old one is released after unlocking")

        _ = confirmed.set(StoredValue(value: ValueBox(2), origin: .network, savedAt: date(20)))
        XCTAssertNil(confirmed.sharedHit(shown: 6), "a new value")
        let newValue = confirmed.makeHit(shown: 6, released: &released)!
        XCTAssertEqual((newValue.box as? ValueBox<Int>)?.value, 2)
        XCTAssertTrue(released === shownAnew.storage)
    }

    func test_keptValues_letGoOfTheOldestBeyondTheBound() {
        for key in 0..<5 { keep(key, stamp: key + 1) }
        XCTAssertEqual(kept.count, 5)
        XCTAssertEqual(letGo(beyond: 3), [0, 1])
        XCTAssertEqual(kept.count, 3)
        XCTAssertEqual(letGo(beyond: 0), [2, 3, 4])
        XCTAssertEqual(kept.count, 0)
    }

    func test_aKeyKeptAgain_movesToTheNewest_andCountsOnce() {
        for key in 0..<3 { keep(key, stamp: key + 1) }
        keep(0, stamp: 10)  // back in use, then out of use again
        XCTAssertEqual(kept.count, 3)
        XCTAssertEqual(letGo(beyond: 2), [1], "0's first record is stale")
        XCTAssertEqual(letGo(beyond: 0), [2, 0])
    }

    func test_aDroppedEntry_noLongerCounts_andItsRecordIsSkipped() {
        for key in 0..<3 { keep(key, stamp: key + 1) }
        let dropped = entries.removeValue(forKey: 0)!
        kept.forget(dropped)
        XCTAssertEqual(kept.count, 2)
        XCTAssertEqual(letGo(beyond: 1), [1])
    }

    func test_keysComingBackAgainAndAgain_keepTheirCount_andTheirLiveRecords() {
        keep(1, stamp: 1)
        keep(2, stamp: 2)
        for stamp in 3..<100_000 { keep(1 + stamp % 2, stamp: stamp) }
        XCTAssertEqual(kept.count, 2)
        XCTAssertEqual(letGo(beyond: 0).count, 2, "the live records survive the compactions")
    }

    func test_refreshedKeys_rememberTheNewestPoint_andForgetTheOldestBeyondTheLimit() {
        var refreshed = StoreMachine.RefreshedKeys()
        XCTAssertTrue(refreshed.note(7, from: 5).isEmpty)
        XCTAssertTrue(refreshed.note(7, from: 3).isEmpty)
        XCTAssertEqual(refreshed.point(of: 7), 5, "the newest point stays")
        let limit = StoreMachine.RefreshedKeys.limit
        var forgotten: [Int] = []
        for key in 100..<(100 + limit) { forgotten += refreshed.note(key, from: key) }
        XCTAssertEqual(forgotten, [7], "the oldest note goes first")
        XCTAssertFalse(refreshed.contains(7))
        XCTAssertEqual(refreshed.removeAll().count, limit)
        XCTAssertNil(refreshed.point(of: 100))
    }

    private func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    func test_invalidationRecords_judgeByPredicateAndDate_andForgetNothingWhenFolding() {
        var records = StoreMachine.InvalidationRecords()
        XCTAssertNil(records.rules(for: 1), "nothing invalidated")
        XCTAssertTrue(records.noteRefreshed(1, from: 1).isEmpty)
        XCTAssertFalse(records.remembersRefresh(of: 1), "not remembered while nothing is invalidated")

        XCTAssertNil(records.record({ ($0 as? String) == "a" }, at: date(100), as: 1))
        let rules = records.rules(for: 1)!
        XCTAssertTrue(rules.isStale("a", savedAt: date(90)))
        XCTAssertFalse(rules.isStale("b", savedAt: date(90)), "another key")
        XCTAssertFalse(rules.isStale("a", savedAt: date(110)), "saved after")

        for mark in 2...StoreMachine.InvalidationRecords.limit {
            XCTAssertNil(records.record({ _ in false }, at: date(200), as: mark))
        }
        let folded = records.record({ _ in false }, at: date(200), as: 100)
        XCTAssertEqual(folded?.generation, 1, "the oldest folds")
        XCTAssertTrue(records.rules(for: 1)!.isStale("b", savedAt: date(90)), "folded: stale for every key, never less")

        // Recording on, past the limit twice over: each new record folds the oldest kept, in the order they came.
        let limit = StoreMachine.InvalidationRecords.limit
        var foldedMarks: [Int] = []
        for mark in 101..<(101 + 2 * limit) {
            foldedMarks.append(records.record({ _ in false }, at: date(300), as: mark)?.generation ?? -1)
        }
        XCTAssertEqual(foldedMarks, Array(2...limit) + [100] + Array(101..<(101 + limit)))
        XCTAssertEqual(records.recordAll(at: date(400), as: 1_000).count, limit, "the limit kept")
    }

    func test_invalidationRecords_areDatedNoEarlierThanTheLatestStamp_evenAfterAClear() {
        var records = StoreMachine.InvalidationRecords()
        records.noteStamp(date(500))
        _ = records.record({ _ in true }, at: date(100), as: 1)  // the clock was set back
        XCTAssertTrue(records.rules(for: 1)!.isStale("a", savedAt: date(500)), "a value the level stamped at 500")

        _ = records.removeAll()
        XCTAssertNil(records.rules(for: 1))
        _ = records.recordAll(at: date(100), as: 2)
        XCTAssertTrue(records.rules(for: 1)!.isStale("a", savedAt: date(500)), "the stamp outlives the clear")
    }

    func test_aKeyRefreshedAfterAnInvalidation_isNotStaleByIt() {
        var records = StoreMachine.InvalidationRecords()
        _ = records.record({ _ in true }, at: date(100), as: 5)
        XCTAssertTrue(records.noteRefreshed(1, from: 6).isEmpty)
        XCTAssertTrue(records.remembersRefresh(of: 1))
        XCTAssertFalse(records.rules(for: 1)!.isStale("a", savedAt: date(50)), "refreshed after the invalidation")
        XCTAssertTrue(records.rules(for: 2)!.isStale("a", savedAt: date(50)))
        let (removed, forgotten) = records.removeAll()
        XCTAssertEqual(removed.count, 1)
        XCTAssertEqual(forgotten, [1])
    }

    func test_levelIssuing_aClearWaitsForTheCallersIssuing_andOneOfThemIssuesItsRemoveAll() {
        var issuing = StoreMachine.LevelIssuing()
        XCTAssertTrue(issuing.start(1))
        XCTAssertTrue(issuing.start(2))
        XCTAssertFalse(issuing.clear(place: 7) {}, "callers are issuing")
        XCTAssertFalse(issuing.clear(place: 9) {}, "a second clear joins the first")
        XCTAssertTrue(issuing.isClearing)
        XCTAssertFalse(issuing.start(3), "held until the removeAll is issued")
        XCTAssertFalse(issuing.start(3))
        XCTAssertFalse(issuing.stop(1, hasMore: false))
        XCTAssertTrue(issuing.stop(2, hasMore: true), "the last caller to stop issues the removeAll")

        let (completions, held, _, place) = issuing.removeAllIssued()
        XCTAssertEqual(completions.count, 2)
        XCTAssertEqual(place, 9, "the shared level is emptied at the latest clear's place")
        XCTAssertNil(issuing.place, "the next clear takes its own")
        XCTAssertEqual(held, [3, 2], "each held key once")
        XCTAssertFalse(issuing.isClearing)
        issuing.resume(held.count)
        XCTAssertFalse(issuing.clear {}, "the held keys' callers are issuing")
        XCTAssertFalse(issuing.stop(3, hasMore: false))
        XCTAssertTrue(issuing.stop(2, hasMore: false))
    }

    func test_levelIssuing_aClearWithNoCallerIssuing_issuesItsRemoveAllAtOnce() {
        var issuing = StoreMachine.LevelIssuing()
        XCTAssertTrue(issuing.clear {})
        XCTAssertFalse(issuing.clear {}, "assigned once")
        XCTAssertEqual(issuing.removeAllIssued().completions.count, 2)
        XCTAssertTrue(issuing.start(1), "issuing again once the levels are empty")
    }

    func test_levelSaves_settleOnceEveryIssuedSaveLanded_andNoFailureIsNewerThanASuccess() {
        var saves = StoreMachine.LevelSaves()
        XCTAssertTrue(saves.isSettled)
        saves.issue(2, version: 1)
        XCTAssertFalse(saves.isSettled, "in flight")
        _ = saves.land(version: 1, failed: true, current: true)
        _ = saves.land(version: 1, failed: false, current: true)
        XCTAssertTrue(saves.isSettled, "one level saved version 1")

        saves.issue(1, version: 2)
        _ = saves.land(version: 2, failed: true, current: true)
        XCTAssertTrue(saves.isBehind, "no level holds version 2")
        XCTAssertFalse(saves.isSettled)
        saves.issue(1, version: 1)
        _ = saves.land(version: 1, failed: false, current: true)
        XCTAssertTrue(saves.isBehind, "an older version saved does not make up for it")
        saves.issue(1, version: 3)
        _ = saves.land(version: 3, failed: false, current: false)
        XCTAssertTrue(saves.isBehind, "a save from before a removal counts as landed only")
        saves.cleared(at: 4)
        XCTAssertTrue(saves.isSettled, "the levels were emptied")
    }

    func test_levelSaves_releaseAFlush_onceTheSavesInFlightWhenItCameHaveLanded_notLaterOnes() {
        var saves = StoreMachine.LevelSaves()
        let ticket = StoreMachine.SaveTicket()
        XCTAssertFalse(saves.whenLanded(ticket), "nothing in flight: the caller releases it at once")
        saves.issue(2, version: 1)
        XCTAssertTrue(saves.whenLanded(ticket))
        saves.issue(1, version: 2)  // a write after the flush
        XCTAssertTrue(saves.land(version: 1, failed: false, current: true).isEmpty, "one level still saves it")
        XCTAssertEqual(
            saves.land(version: 1, failed: true, current: true).count, 1,
            "landed (a failure too), without waiting for version 2")
        XCTAssertTrue(saves.land(version: 2, failed: false, current: true).isEmpty, "released once")

        saves.issue(1, version: 5)
        saves.issue(1, version: 3)  // a debounced write of an older value, flushed after a newer one was saved
        XCTAssertTrue(saves.whenLanded(ticket))
        XCTAssertTrue(saves.land(version: 3, failed: false, current: true).isEmpty)
        XCTAssertEqual(saves.land(version: 5, failed: false, current: true).count, 1)
        XCTAssertTrue(saves.isSettled)
    }

    func test_staleness_theLatestMarkHolds_andAFreshValueOrARemovalClearsIt() {
        var staleness = StoreMachine.Staleness()
        XCTAssertFalse(staleness.isStale)
        staleness.markStale(at: 0)
        XCTAssertFalse(staleness.isStale, "a mark of zero changes nothing")
        staleness.markStale(at: 7)
        staleness.markStale(at: 5)
        XCTAssertEqual(staleness.mark, 7, "an older invalidation does not move the mark back")
        staleness.makeFresh()
        XCTAssertFalse(staleness.isStale)

        staleness.markStale(at: 9)
        staleness.oweRefetch()
        staleness.reset()
        XCTAssertFalse(staleness.isStale)
        XCTAssertFalse(staleness.owesRefetch, "what made it owed is gone with the value")
    }

    func test_staleness_aLevelValueIsJudgedByTheRecords_unlessAnInvalidationMatchedWhileItWasRead() {
        var staleness = StoreMachine.Staleness()
        staleness.markStale(at: 3)
        staleness.confirmLevelValue(staleSince: nil, markWhenRead: 3)
        XCTAssertFalse(staleness.isStale, "the records judge the level's value fresh")
        staleness.confirmLevelValue(staleSince: 4, markWhenRead: 0)
        XCTAssertEqual(staleness.mark, 4)
        staleness.markStale(at: 6)
        staleness.confirmLevelValue(staleSince: nil, markWhenRead: 4)
        XCTAssertEqual(staleness.mark, 6, "marked while the level was read")
    }

    func test_staleness_oneRefetchIsOwed_andAFetchThatWaitsCountsAsNotSent() {
        var staleness = StoreMachine.Staleness()
        staleness.markStale(at: 10)
        staleness.oweRefetch()
        staleness.markStale(at: 12)
        staleness.oweRefetch()
        XCTAssertTrue(staleness.owesRefetch)
        staleness.fetchWaits(sentAt: 11)
        XCTAssertTrue(staleness.owesRefetch, "owed since 10, before the fetch was sent")
        staleness.fetchWaits(sentAt: 9)
        XCTAssertFalse(staleness.owesRefetch, "owed since after the waiting fetch was sent: what it brings is fresh")
        staleness.oweRefetch()
        staleness.settleRefetch()
        XCTAssertFalse(staleness.owesRefetch)
        staleness.markStale(at: 14)
        staleness.oweRefetch()
        staleness.makeFresh()
        XCTAssertFalse(staleness.owesRefetch, "a fresh value needs no refetch for the invalidation before it")

        staleness.markStale(at: 16)
        staleness.oweRefetch()
        staleness.markStale(at: 18)
        staleness.changeConfirmed(askedAt: 17)
        XCTAssertTrue(staleness.isStale, "invalidated after the change was asked")
        XCTAssertFalse(staleness.owesRefetch, "the change is fresh against the invalidation that owed the refetch")
        staleness.oweRefetch()
        staleness.changeConfirmed(askedAt: 17)
        XCTAssertTrue(staleness.owesRefetch, "owed again by the invalidation after the change was asked")
    }

    private struct Failure: Error, Equatable { let name: String }

    func test_shownStates_aFailureIsToldOnce_andIsNewsUntilAValueIsConfirmed() {
        var shown = StoreMachine.ShownStates()
        XCTAssertFalse(shown.isBehind(isLoading: false))
        XCTAssertTrue(shown.isBehind(isLoading: true), "started loading")
        shown.showLoading(true)
        XCTAssertFalse(shown.isBehind(isLoading: true))

        XCTAssertTrue(shown.noteFailure(Failure(name: "first"), at: 2))
        XCTAssertFalse(shown.noteFailure(Failure(name: "second"), at: 2), "a failure after another is not told again")
        XCTAssertEqual(shown.failure(at: 2) as? Failure, Failure(name: "second"), "the next notice shows the latest")
        XCTAssertTrue(shown.isBehind(isLoading: true), "a failure not told")
        shown.showLoading(true)
        XCTAssertTrue(shown.isBehind(isLoading: true), "a snapshot of the value does not tell the failure")
        shown.showNotice(isLoading: false)
        XCTAssertFalse(shown.isBehind(isLoading: false))

        XCTAssertNil(shown.failure(at: 3), "a value confirmed since makes it old")
        XCTAssertTrue(shown.noteFailure(Failure(name: "third"), at: 3), "news again")
    }

    func test_keyWork_isDoneOnlyWhenNothingIsUnderWay_ofEachKind() {
        var work = StoreMachine.KeyWork()
        XCTAssertTrue(work.isDone)

        work.fetches.begin(id: 1, generation: 1, logStart: 0, sentMark: 0, caller: caller(1))
        XCTAssertFalse(work.isDone, "a fetch in flight")
        _ = work.fetches.end(1)
        XCTAssertTrue(work.isDone)

        work.pending.insert(StoreMachine.Mutation(id: 2, change: { $0 }))
        XCTAssertFalse(work.isDone, "an optimistic change not settled")
        _ = work.pending.removeAll()
        XCTAssertTrue(work.isDone)

        XCTAssertTrue(work.turn.take())
        XCTAssertFalse(work.isDone, "a change runs")
        work.turn.end()
        XCTAssertTrue(work.isDone)

        work.writes.append(
            .remove(levels: 0..<1, ticket: nil, mark: StoreMachine.SaveMark(generation: 1, version: 1, staleSince: 0)))
        XCTAssertFalse(work.isDone, "a level operation not issued")
        _ = work.writes.removeAll()
        XCTAssertTrue(work.isDone)

        work.saves.issue(1, version: 1)
        XCTAssertFalse(work.isDone, "a save in flight")
        _ = work.saves.land(version: 1, failed: false, current: true)
        XCTAssertTrue(work.isDone)
    }

    func test_keyTurn_oneCallerTakesIt_andChangesApplyInTheOrderAsked() {
        var turn = StoreMachine.KeyTurn()
        XCTAssertTrue(turn.isFree)
        XCTAssertTrue(turn.take())
        XCTAssertFalse(turn.take(), "another caller has it")
        XCTAssertFalse(turn.isFree)
        turn.enqueue(.barrier(reply: {}), askedAt: 4)
        turn.enqueue(.load, askedAt: 6)
        XCTAssertTrue(turn.hasQueued)

        guard case .barrier = turn.takeHead() else { return XCTFail("the first asked applies first") }
        XCTAssertEqual(turn.asking, 4)
        turn.putBack(.barrier(reply: {}))
        guard case .barrier = turn.head else { return XCTFail("put back at the head") }
        _ = turn.takeHead()
        XCTAssertEqual(turn.asking, 4, "asked when it was first")
        guard case .load = turn.takeHead() else { return XCTFail("then the next") }
        XCTAssertEqual(turn.asking, 6)
        turn.end()
        XCTAssertTrue(turn.isFree)
        turn.apply(askedAt: 9)
        XCTAssertEqual(turn.asking, 9, "a change applied at once")
    }

    func test_keyTurn_aRemovalDropsWhatItPicks_butNotTheHeadWhileItRuns() {
        var turn = StoreMachine.KeyTurn()
        _ = turn.take()
        turn.enqueue(.load, askedAt: 1)
        turn.enqueue(.load, askedAt: 2)
        turn.enqueue(.barrier(reply: {}), askedAt: 3)
        turn.headStartsRunning()
        let dropped = turn.drop { if case .load = $0 { true } else { false } }
        XCTAssertEqual(dropped.count, 1, "the running head stays")
        guard case .load = turn.takeHead() else { return XCTFail("the head stays at the head") }
        XCTAssertEqual(turn.asking, 1)
        guard case .barrier = turn.takeHead() else { return XCTFail("what was not picked stays") }
        XCTAssertEqual(turn.asking, 3, "with when it was asked")
        XCTAssertFalse(turn.hasQueued)

        turn.enqueue(.load, askedAt: 5)
        XCTAssertEqual(turn.drop { _ in true }.count, 1, "a head that does not run is dropped")
    }

    private func debouncedWrite(_ id: Int, _ value: String) -> StoreMachine.DebouncedWrite {
        StoreMachine.DebouncedWrite(
            id: id, value: ValueBox(value), savedAt: 0,
            mark: StoreMachine.SaveMark(generation: 1, version: 1, staleSince: 0),
            timer: FinishedToken())
    }

    private func flushedLevels(_ ops: InlineFirstArray<StoreMachine.LevelOp>) -> [Int] {
        ([ops.head].compactMap { $0 } + ops.tail).compactMap {
            if case .flush(_, _, let level, _, _) = $0 { level } else { nil }
        }
    }

    func test_levelWrites_aNewerDebouncedWriteReplacesTheOneWaiting_andOnlyTheLatestFires() {
        var writes = StoreMachine.LevelWrites()
        XCTAssertTrue(writes.isSettled)
        XCTAssertNil(writes.debounce(debouncedWrite(1, "a"), at: 2))
        XCTAssertNotNil(writes.debounce(debouncedWrite(2, "b"), at: 2), "the older write's timer is handed back")
        XCTAssertTrue(writes.isBehind(at: 2))
        XCTAssertFalse(writes.isBehind(at: 1), "nothing waits for level 1")
        XCTAssertFalse(writes.keepTimer(FinishedToken(), ofWrite: 1, level: 2), "write 1 no longer waits")
        XCTAssertTrue(writes.keepTimer(FinishedToken(), ofWrite: 2, level: 2))
        XCTAssertNil(writes.fire(1, level: 2), "a replaced write's timer fires for nothing")
        XCTAssertNotNil(writes.fire(2, level: 2))
        XCTAssertFalse(writes.hasDebounced)
        XCTAssertTrue(writes.hasOps, "the write became an operation")
        XCTAssertEqual(flushedLevels(writes.takeOps()), [2])
        XCTAssertTrue(writes.isSettled)
    }

    func test_levelWrites_aDebouncedLevelSavesOneWriteAtATime_andAClearForgetsTheSavesNeverIssued() {
        var writes = StoreMachine.LevelWrites()
        _ = writes.debounce(debouncedWrite(1, "a"), at: 1)
        XCTAssertNotNil(writes.fire(1, level: 1))
        XCTAssertEqual(flushedLevels(writes.takeOps()), [1], "on its way to level 1")
        _ = writes.debounce(debouncedWrite(2, "b"), at: 1)
        XCTAssertNil(writes.fire(2, level: 1), "waits for the save on its way")
        _ = writes.debounce(debouncedWrite(3, "c"), at: 1)
        XCTAssertNil(writes.fire(3, level: 1), "the newer write replaced it, and waits too")
        XCTAssertFalse(writes.hasOps)

        XCTAssertTrue(writes.flushLanded(at: 1).issues, "the save landed: the latest goes")
        XCTAssertEqual(flushedLevels(writes.takeOps()), [1])
        XCTAssertFalse(writes.flushLanded(at: 1).issues, "nothing more waited")

        _ = writes.debounce(debouncedWrite(4, "d"), at: 2)
        XCTAssertNotNil(writes.fire(4, level: 2))
        _ = writes.removeAll()  // a clear, before the save was issued
        _ = writes.debounce(debouncedWrite(5, "e"), at: 2)
        XCTAssertNotNil(writes.fire(5, level: 2), "a save the clear dropped is not on its way")
        XCTAssertTrue(writes.hasOps)
    }

    func test_levelWrites_aFlushIssuesEveryDebouncedWriteInLevelOrder_andAClearDropsEverything() {
        var writes = StoreMachine.LevelWrites()
        _ = writes.debounce(debouncedWrite(1, "a"), at: 3)
        _ = writes.debounce(debouncedWrite(2, "b"), at: 1)
        let ticket = StoreMachine.SaveTicket()
        XCTAssertEqual(writes.flushDebounced(holding: ticket).count, 2)
        XCTAssertEqual(flushedLevels(writes.takeOps()), [1, 3])

        _ = writes.debounce(debouncedWrite(3, "c"), at: 1)
        let mark = StoreMachine.SaveMark(generation: 1, version: 2, staleSince: 0)
        writes.append(.remove(levels: 0..<2, ticket: ticket, mark: mark))
        writes.startIssuing()
        XCTAssertNotNil(writes.takeOnlyOp(), "one operation is taken alone")
        XCTAssertFalse(writes.isSettled, "a caller is issuing")
        writes.append(
            .remove(levels: 0..<2, ticket: nil, mark: StoreMachine.SaveMark(generation: 1, version: 3, staleSince: 0)))
        writes.append(
            .remove(levels: 0..<2, ticket: nil, mark: StoreMachine.SaveMark(generation: 1, version: 4, staleSince: 0)))
        XCTAssertNil(writes.takeOnlyOp(), "not when more wait")
        let (ops, timers, outlives) = writes.removeAll()
        XCTAssertFalse(outlives, "a clear of this store keeps nothing")
        XCTAssertEqual(ops.count, 2)
        XCTAssertEqual(timers.count, 1)
        writes.stopIssuing()
        XCTAssertTrue(writes.isSettled)
    }

    func test_levelWrites_aLogoutElsewhere_keepsTheChangesMadeAfterIt_whenTheLatestIsOne() {
        func save(_ value: String, at place: UInt64) -> StoreMachine.LevelOp {
            .save(
                ValueBox(value), savedAt: 0, levels: 0..<2, skipsDebounced: false, ticket: nil, answersFetch: false,
                mark: StoreMachine.SaveMark(generation: 1, version: 1, staleSince: 0, place: place))
        }
        func saved(_ ops: InlineFirstArray<StoreMachine.LevelOp>) -> [String] {
            ([ops.head].compactMap { $0 } + ops.tail).map {
                switch $0 {
                case .save(let value, _, _, _, _, _, _): (value as? ValueBox<String>)?.value ?? "?"
                case .waitForSaves: "wait"
                default: "other"
                }
            }
        }
        var writes = StoreMachine.LevelWrites()
        writes.append(save("old user", at: 5))
        writes.append(.waitForSaves(ticket: StoreMachine.SaveTicket()))
        writes.append(save("next user", at: 9))
        let (dropped, _, outlives) = writes.removeAll(keepingChangesAfter: 7)
        XCTAssertTrue(outlives, "the latest change was made after the logout")
        XCTAssertEqual(dropped.count, 1, "the change made before the logout goes")
        XCTAssertEqual(saved(writes.takeOps()), ["wait", "next user"], "the rest stays, in order")

        writes.append(save("next user", at: 9))
        writes.append(save("old user", at: StoreMachine.SaveMark.unplaced))
        let unplaced = writes.removeAll(keepingChangesAfter: 7)
        XCTAssertFalse(unplaced.outlives, "the latest change has no place: nothing says it is the next user's")
        XCTAssertEqual(unplaced.ops.count, 2)
        XCTAssertFalse(writes.hasOps)

        writes.append(save("old user", at: 5))
        XCTAssertFalse(writes.removeAll(keepingChangesAfter: 7).outlives)
        XCTAssertFalse(writes.hasOps, "made before the logout: dropped")
    }

    func test_levelWrites_anOperationTakenAlone_leavesTheStorage_whichGoesToTheNextKeysOperations() {
        var spare: [StoreMachine.LevelOp] = []
        var writes = StoreMachine.LevelWrites()
        writes.takeStorage(from: &spare)
        writes.append(
            .remove(levels: 0..<1, ticket: nil, mark: StoreMachine.SaveMark(generation: 1, version: 1, staleSince: 0)))
        writes.giveStorage(to: &spare)
        XCTAssertEqual(spare.capacity, 0, "not while an operation waits")
        XCTAssertEqual(writes.takeOps().count, 1)
        writes.giveStorage(to: &spare)
        XCTAssertGreaterThan(spare.capacity, 0, "taken alone: the storage is left, and goes to the spare")

        var next = StoreMachine.LevelWrites()
        next.takeStorage(from: &spare)
        XCTAssertEqual(spare.capacity, 0, "the next key's list took it")
        for version in 2...3 {
            next.append(
                .remove(
                    levels: 0..<1, ticket: nil,
                    mark: StoreMachine.SaveMark(generation: 1, version: version, staleSince: 0)))
        }
        XCTAssertEqual(next.takeOps().count, 2, "more than one: taken with their storage")
        next.giveStorage(to: &spare)
        XCTAssertEqual(spare.capacity, 0, "none left to give")
        XCTAssertTrue(next.isSettled)
    }

    private func fetch(generation: Int, logStart: Int) -> StoreMachine.Fetch {
        StoreMachine.Fetch(
            id: 1, generation: generation, logStart: logStart, sentMark: logStart + 1, callers: OrderedQueue())
    }

    private func applied(_ changes: [StoreMachine.Change]) -> String? {
        let value = changes.reduce(ValueBox("") as StoreMachine.Value?) { value, change in change(value) }
        return (value as? ValueBox<String>)?.value
    }

    private func appending(_ text: String) -> StoreMachine.Change {
        { value in ValueBox(((value as? ValueBox<String>)?.value ?? "") + text) }
    }

    func test_changeLog_aFetchAppliesAgainTheChangesOfItsGenerationAskedAfterItBegan_inOrder() {
        var log = StoreMachine.ChangeLog()
        XCTAssertTrue(log.isEmpty)
        log.append(appending("a"), askedAt: 3, generation: 1)
        log.append(appending("b"), askedAt: 5, generation: 1)
        log.append(appending("c"), askedAt: 6, generation: 2)
        log.append(appending("d"), askedAt: 7, generation: 2)

        XCTAssertEqual(applied(log.changes(for: fetch(generation: 1, logStart: 2))), "ab")
        XCTAssertEqual(applied(log.changes(for: fetch(generation: 1, logStart: 3))), "b", "asked before it began")
        XCTAssertEqual(applied(log.changes(for: fetch(generation: 2, logStart: 0))), "cd", "not across a removal")
        XCTAssertFalse(log.hasChanges(for: fetch(generation: 2, logStart: 7)))
        XCTAssertTrue(log.hasChanges(for: fetch(generation: 2, logStart: 6)))

        log.trim(keepingAfter: 5)
        XCTAssertEqual(applied(log.changes(for: fetch(generation: 2, logStart: 0))), "cd")
        XCTAssertFalse(log.hasChanges(for: fetch(generation: 1, logStart: 0)), "no fetch in flight needs them")
        log.trim(keepingAfter: nil)
        XCTAssertTrue(log.isEmpty, "no fetch in flight")
    }

    func test_changeLog_remembersTheNewestChangeNotLogged() {
        var log = StoreMachine.ChangeLog()
        log.skip(askedAt: 8)
        log.skip(askedAt: 4)
        XCTAssertEqual(log.lastUnlogged, 8)
        XCTAssertTrue(log.isEmpty)
    }

    private func caller(_ id: Int) -> StoreMachine.FetchCaller {
        StoreMachine.FetchCaller(id: id, completion: { _ in })
    }

    func test_fetchesInFlight_aListWithNoFetchLeft_givesItsStorageBack_forTheNextKeyThatFetches() {
        var spare: [StoreMachine.Fetch] = []
        var first = StoreMachine.FetchesInFlight()
        first.takeStorage(from: &spare)
        first.begin(id: 1, generation: 1, logStart: 0, sentMark: 1, caller: caller(1))
        first.begin(id: 2, generation: 1, logStart: 0, sentMark: 2, caller: caller(2))
        _ = first.end(1)
        first.giveStorage(to: &spare)
        XCTAssertEqual(spare.capacity, 0, "a fetch is still in flight: the list keeps its storage")

        _ = first.end(2)
        first.giveStorage(to: &spare)
        XCTAssertGreaterThan(spare.capacity, 0, "no fetch left: the storage goes to the spare")
        XCTAssertTrue(spare.isEmpty)

        var next = StoreMachine.FetchesInFlight()
        next.takeStorage(from: &spare)
        XCTAssertEqual(spare.capacity, 0, "the next key's list took it")
        next.begin(id: 3, generation: 2, logStart: 0, sentMark: 3, caller: caller(3))
        XCTAssertEqual(next.withCallers.map(\.id), [3])
    }

    func test_fetchesInFlight_aCallerJoinsTheNewestFetchOfItsGeneration_thatOthersHaveNotLeft() {
        var fetches = StoreMachine.FetchesInFlight()
        XCTAssertNil(fetches.join(caller(1), generation: 1), "none in flight")
        fetches.begin(id: 10, generation: 1, logStart: 4, sentMark: 5, caller: caller(1))
        fetches.begin(id: 11, generation: 2, logStart: 6, sentMark: 7, caller: caller(2))
        XCTAssertNil(fetches.join(caller(3), generation: 1), "the newest is of another generation")
        XCTAssertEqual(fetches.join(caller(3), generation: 2), 11)
        XCTAssertTrue(fetches.isLoading(generation: 1))
        XCTAssertEqual(fetches.oldestLogStart(), 4)
        XCTAssertEqual(fetches.oldestLogStart(generation: 2), 6)

        XCTAssertNil(fetches.leave(9, of: 11), "not a caller")
        XCTAssertNil(fetches.leave(2, of: 11)?.ended, "a caller is left")
        XCTAssertNil(fetches.leave(3, of: 11)?.ended, "no token kept yet: abandoned, not ended")
        XCTAssertNil(fetches.join(caller(4), generation: 2), "every caller left it")
        XCTAssertTrue(fetches.keepToken(FinishedToken(), of: 11), "its token comes: it ends, to cancel")
        XCTAssertFalse(fetches.contains(11))
        XCTAssertEqual(fetches.withCallers.map(\.id), [10])
        XCTAssertEqual(fetches.end(10)?.id, 10)
        XCTAssertNil(fetches.end(10), "ended once")
        XCTAssertFalse(fetches.hasCallers)
        XCTAssertFalse(fetches.isLoading(generation: 1))
        XCTAssertFalse(fetches.add(caller(5), to: 10), "not in flight")
    }

    func test_fetchesInFlight_theLastCallerLeavingAFetchWithItsToken_endsIt_andAWaitingFetchCountsAsNotSent() {
        var fetches = StoreMachine.FetchesInFlight()
        fetches.begin(id: 20, generation: 1, logStart: 0, sentMark: 3, caller: caller(1))
        XCTAssertFalse(fetches.keepToken(FinishedToken(), of: 20), "kept: a caller waits")
        XCTAssertTrue(fetches.add(caller(2), to: 20))
        XCTAssertEqual(fetches.wait(20), 3, "it had counted as sent at 3")
        XCTAssertNil(fetches.wait(20), "not sent while it waits")
        fetches.send(20, at: 8)
        XCTAssertEqual(fetches.fetch(20)?.sentMark, 8)
        fetches.noteLevelAnswer(of: 20, level: 1, savedAt: 42)
        XCTAssertEqual(fetches.fetch(20)?.levelAnswer?.savedAt, 42)
        XCTAssertNil(fetches.leave(1, of: 20)?.ended)
        let last = fetches.leave(2, of: 20)
        XCTAssertEqual(last?.left.id, 2)
        XCTAssertNotNil(last?.ended?.token, "ended with its token, to cancel")
        XCTAssertTrue(fetches.isEmpty)
    }

    func test_fetchesInFlight_lastAskedWins() {
        var fetches = StoreMachine.FetchesInFlight()
        XCTAssertTrue(fetches.confirm(12))
        XCTAssertFalse(fetches.confirm(11), "a fetch started before the one confirmed")
        XCTAssertFalse(fetches.confirm(12))
        XCTAssertTrue(fetches.confirm(13))
    }

    func test_responseSubject_replaysTheLatestResponse_andNeverSendsAnOlderOne() {
        func response(_ version: Int) -> StoreResponse<any StoreValueBox> {
            StoreResponse(
                value: nil, origin: .network, savedAt: nil, hasPendingChanges: false, error: nil, version: version)
        }
        let subject = ResponseSubject()
        let early = StreamRecorder(subject.stream.map(\.version))
        XCTAssertEqual(early.values, [], "nothing to replay before the first response")

        subject.send(response(2))
        subject.send(response(1))
        subject.send(response(2))
        XCTAssertEqual(early.values, [2], "an older or equal version is not sent")

        let late = StreamRecorder(subject.stream.map(\.version))
        subject.send(response(5))
        XCTAssertEqual(late.values, [2, 5], "the latest response first, then newer ones")
        XCTAssertEqual(early.values, [2, 5])
    }
}
