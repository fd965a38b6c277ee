import Foundation
import XCTest

@testable import Loading

/// The store's state machine alone: each race is a sequence of events, and the test reads the effects.
final class StoreMachineTests: XCTestCase {
    private typealias Machine = StoreMachine
    private let now = Date(timeIntervalSinceReferenceDate: 1_000)

    // MARK: Removal and clear beat what is in flight

    func test_aLevelReadThatEndsAfterAClear_answersWithNothing_andConfirmsNothing() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)

        _ = machine.clear {}
        let effects = try XCTUnwrap(machine.submit(hit("old", stamp), for: K.a, now: now).effects)

        XCTAssertEqual(
            effects.hitReplies.map { $0.snapshot.confirmed.text }, [nil], "the pre-logout value is not shown")
        XCTAssertTrue(effects.allPublished.isEmpty)
        XCTAssertNil(machine.shown(K.a))
    }

    func test_aLevelReadThatEndsAfterARemoval_answersWithNothing() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)

        _ = machine.remove(K.a)
        let effects = try XCTUnwrap(machine.submit(hit("old", stamp), for: K.a, now: now).effects)

        XCTAssertEqual(effects.hitReplies.map { $0.snapshot.confirmed.text }, [nil])
    }

    func test_aLevelReadThatLostToAWrite_answersWithTheWrite() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)

        _ = machine.submit(.write(stored("new")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let effects = try XCTUnwrap(machine.submit(hit("old", stamp), for: K.a, now: now).effects)

        XCTAssertEqual(effects.hitReplies.map { $0.snapshot.confirmed.text }, ["new"])
        XCTAssertTrue(effects.allPublished.isEmpty, "nothing newer to show")
    }

    // MARK: What another process changed in a shared level

    func test_aValueAnotherProcessSaved_isShown_andSavedToTheFasterLevelsOnly() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)

        let effects = try XCTUnwrap(machine.submit(external("theirs", stamp), for: K.a, now: now).effects)

        XCTAssertEqual(effects.allPublished.map { $0.confirmed.text }, ["theirs"])
        guard case .save(_, _, let levels, _, _, _, _)? = machine.takeLevelOps(of: K.a)?.ops.head else {
            return XCTFail("expected a save")
        }
        XCTAssertEqual(levels, 0..<1, "the shared level is not written back")
    }

    func test_aValueAnotherProcessRemoved_isRemovedFromTheFasterLevelsOnly() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        _ = machine.submit(.write(stored("ours")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        issueAndLand(&machine, K.a)
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)

        let effects = try XCTUnwrap(machine.submit(external(nil, stamp), for: K.a, now: now).effects)

        XCTAssertEqual(effects.allPublished.map { $0.confirmed.text }, [nil])
        guard case .remove(let levels, _, _, _)? = machine.takeLevelOps(of: K.a)?.ops.head else {
            return XCTFail("expected a removal")
        }
        XCTAssertEqual(levels, 0..<1)
    }

    func test_whatAnotherProcessChanged_losesToWhatThisStoreLearnedWhileTheLevelWasRead() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)
        _ = machine.submit(.write(stored("ours, later")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        let effects = try XCTUnwrap(machine.submit(external("theirs", stamp), for: K.a, now: now).effects)

        XCTAssertTrue(effects.allPublished.isEmpty)
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "ours, later")
    }

    func test_aClearAnotherProcessMade_emptiesTheFasterLevels_unlessAClearOfEveryLevelJoinsIt() {
        var machine = makeMachine()
        XCTAssertTrue(machine.clear(levels: 1) {}.removeAll)
        XCTAssertEqual(machine.levelsToEmpty, 1)
        XCTAssertEqual(machine.removeAllIssued().levels, 1, "the shared level is left to its process")

        var joined = makeMachine()
        _ = joined.clear(levels: 1) {}
        _ = joined.clear {}
        XCTAssertEqual(joined.removeAllIssued().levels, 2, "a clear of this store empties every level")
    }

    func test_aFetchThatEndsAfterAClear_isDiscarded() throws {
        var machine = makeMachine()
        let fetch = machine.beginFetch(K.a, joining: true) { _ in }

        _ = machine.clear {}
        let effects = try XCTUnwrap(
            machine.submit(.fetched(ValueBox("old"), fetch: fetch.fetch), for: K.a, now: now).effects)

        XCTAssertEqual(effects.fetchReplies.count, 1)
        XCTAssertThrowsError(try effects.fetchReplies[0].result.get()) { XCTAssertEqual($0 as? StoreError, .discarded) }
        XCTAssertNil(machine.shown(K.a))
    }

    // MARK: Last asked wins

    func test_aFetchOlderThanARefresh_neverReplacesWhatTheRefreshBrought() throws {
        var machine = makeMachine()
        let older = machine.beginFetch(K.a, joining: true) { _ in }
        let refresh = machine.beginFetch(K.a, joining: false) { _ in }
        XCTAssertTrue(refresh.starts, "a refresh never joins")

        _ = machine.submit(.fetched(ValueBox("new"), fetch: refresh.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let effects = try XCTUnwrap(
            machine.submit(.fetched(ValueBox("old"), fetch: older.fetch), for: K.a, now: now).effects)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "new")
        XCTAssertEqual(try effects.fetchReplies.map { try $0.result.get().confirmed.text }, ["new"])
        XCTAssertTrue(effects.allPublished.isEmpty)
        XCTAssertFalse(effects.issueLevels, "the levels are not written with the older value")
    }

    func test_aReadThatMissedTheLastLevel_fetchesWithTheSameEntry_unlessTheStoreLearnedAValueMeanwhile() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 0).stamp)
        let generation = try XCTUnwrap(machine.peek(K.a)).generation

        let missed = machine.endLastLevelReadThenFetch(K.a, readAt: stamp, since: stamp, asked: 0) { _ in }
        XCTAssertNil(missed.learnedSnapshot)
        XCTAssertEqual(missed.begun?.starts, true)
        XCTAssertEqual(machine.peek(K.a)?.generation, generation, "the key stayed in use: its entry was kept")
        XCTAssertEqual(machine.peek(K.a)?.levelReads, 0)

        let later = try XCTUnwrap(machine.beginLevelRead(K.b, level: 0).stamp)
        _ = machine.submit(.write(stored("written")), for: K.b, now: now)
        _ = finishChanges(&machine, K.b)
        let overtaken = machine.endLastLevelReadThenFetch(K.b, readAt: later, since: later, asked: 0) { _ in }
        XCTAssertEqual(overtaken.learnedSnapshot?.confirmed.text, "written", "what the store learned is the answer")
        XCTAssertNil(overtaken.begun, "and no fetch begins")
        XCTAssertEqual(machine.peek(K.b)?.levelReads, 0)

        let fetch = try XCTUnwrap(missed.begun)
        XCTAssertNil(machine.keepToken(AnyCancellationToken {}, ofFetch: fetch.fetch, for: K.a))
        XCTAssertNotNil(machine.leaveFetch(fetch.fetch, caller: fetch.caller, of: K.a).cancel)
        XCTAssertNil(machine.peek(K.a), "the last caller out lets the key go")
    }

    func test_aFetchThatFailsAfterItsLastCallerLeft_changesNothing_evenWhenItsKeyIsGone() throws {
        var machine = makeMachine()
        let fetch = machine.beginFetch(K.a, joining: true) { _ in XCTFail("the caller left") }
        XCTAssertNil(machine.keepToken(AnyCancellationToken {}, ofFetch: fetch.fetch, for: K.a))
        XCTAssertNotNil(machine.leaveFetch(fetch.fetch, caller: fetch.caller, of: K.a).cancel)
        XCTAssertEqual(machine.count, 0)

        // The upstream load had already begun to fail on another thread when it was cancelled.
        let effects = machine.fetchFailed(fetch.fetch, of: K.a, with: TestError(id: 1))

        XCTAssertTrue(effects.fetchReplies.isEmpty)
        XCTAssertEqual(machine.count, 0)
    }

    func test_readsJoinTheNewestFetch_andTheLastCallerOutCancelsIt() {
        var machine = makeMachine()
        let first = machine.beginFetch(K.a, joining: true) { _ in }
        let second = machine.beginFetch(K.a, joining: true) { _ in }
        XCTAssertEqual(first.fetch, second.fetch)
        XCTAssertFalse(second.starts)
        XCTAssertNil(machine.keepToken(AnyCancellationToken {}, ofFetch: first.fetch, for: K.a))

        XCTAssertNil(machine.leaveFetch(first.fetch, caller: first.caller, of: K.a).cancel)
        XCTAssertNotNil(machine.leaveFetch(second.fetch, caller: second.caller, of: K.a).cancel)
        XCTAssertEqual(machine.count, 0)
    }

    // MARK: Per-key order

    func test_aKeyRunningAChange_queuesItsNextChanges_butNeverAnotherKeys() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)
        XCTAssertTrue(machine.submit(.write(stored("2")), for: K.a, now: now).isQueued, "same key: in order")
        XCTAssertNotNil(machine.submit(.write(stored("b")), for: K.b, now: now).effects, "another key: at once")

        _ = machine.commit(work, result: work.run(), for: K.a, now: now)
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1+u")
        _ = finishChanges(&machine, K.a)
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "2", "the write asked after the update lands after it")
    }

    func test_anUpdateOfAKeyNotHeld_readsTheLevelsFirst() throws {
        var machine = makeMachine()

        let step = machine.submit(update { $0.map { $0 + "+live" } }, for: K.a, now: now)
        guard case .loadBase(let generation) = step else { return XCTFail("expected a level read, got \(step)") }
        _ = machine.commitBase(
            CachedValue("saved", savedAt: now).boxed, level: 1, generation: generation, staleSince: nil,
            for: K.a)
        let work = try XCTUnwrap(machine.nextChange(of: K.a, now: now)?.work)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "saved+live")
    }

    func test_aFetchAfterARemoval_neverAppliesAChangeMadeBeforeIt_whileAnOlderFetchIsInFlight() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        _ = machine.beginFetch(K.a, joining: true) { _ in }  // still in flight after the removal
        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)

        _ = machine.remove(K.a)
        let after = machine.beginFetch(K.a, joining: true) { _ in }
        XCTAssertTrue(after.starts, "a fetch from before the removal is not joined")
        _ = machine.submit(.fetched(ValueBox("server"), fetch: after.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "server", "the update was made before the removal")
    }

    func test_aReadAskedBeforeAClear_whoseFetchBeginsAfterIt_neverAppliesAChangeMadeBeforeTheClear() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        _ = machine.beginFetch(K.a, joining: true) { _ in }  // still in flight after the clear
        let asked = machine.readStamp  // a read begins (its turn and its level reads come later)
        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)

        _ = machine.clear {}
        let read = machine.beginFetch(K.a, joining: true, asked: asked) { _ in }
        XCTAssertTrue(read.starts, "a fetch from before the clear is not joined")
        _ = machine.submit(.fetched(ValueBox("server"), fetch: read.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "server", "the update was made before the clear")
    }

    func test_aRemovalWhileAnUpdateRuns_wins() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)

        _ = machine.remove(K.a)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)

        XCTAssertNil(machine.shown(K.a), "the update was asked before the removal")
    }

    func test_aRemovalWhileAnUpdateWaitsForTheLevels_leavesTheWritesAskedAfterIt() throws {
        var machine = makeMachine()
        let step = machine.submit(update { ($0 ?? "") + "+u" }, for: K.a, now: now)
        guard case .loadBase(let generation) = step else { return XCTFail("expected a level read, got \(step)") }
        XCTAssertTrue(machine.submit(.write(stored("2")), for: K.a, now: now).isQueued)

        _ = machine.remove(K.a)
        XCTAssertTrue(machine.submit(.write(stored("3")), for: K.a, now: now).isQueued)
        _ = machine.commitBase(nil, level: 0, generation: generation, staleSince: nil, for: K.a)
        _ = finishChanges(&machine, K.a)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "3", "the write was asked after the removal")
    }

    func test_aRemovalWhileAnUpdateRuns_leavesTheWriteAskedAfterIt() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)

        _ = machine.remove(K.a)
        XCTAssertTrue(machine.submit(.write(stored("3")), for: K.a, now: now).isQueued)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "3", "the write was asked after the removal")
    }

    // MARK: Level operations and the clear barrier

    func test_aClear_waitsForTheLevelOperationsBeingIssued_andHoldsTheNextOnes() throws {
        var machine = makeMachine()
        let write = try XCTUnwrap(machine.submit(.write(stored("1")), for: K.a, now: now).effects)
        XCTAssertTrue(write.issueLevels, "the writer issues its key's level operations")
        XCTAssertEqual(machine.takeLevelOps(of: K.a)?.ops.count, 1)  // being issued now

        XCTAssertFalse(machine.clear {}.removeAll, "the write being issued goes first")
        _ = finishChanges(&machine, K.a)
        let afterClear = try XCTUnwrap(machine.submit(.write(stored("2")), for: K.b, now: now).effects)
        XCTAssertFalse(afterClear.issueLevels, "held behind the clear's removeAll")

        XCTAssertEqual(machine.takeLevelOps(of: K.a)?.removeAll, true, "the last issuer issues the removeAll")
        let released = machine.removeAllIssued()
        XCTAssertEqual(released.completions.count, 1)
        XCTAssertEqual(released.held, [K.b])
    }

    func test_levelsAreNotReadWhileAClearEmptiesThem() {
        var machine = makeMachine()
        _ = machine.clear {}
        guard case .known(nil) = machine.beginLevelRead(K.a, level: 1) else { return XCTFail("expected a miss") }
    }

    func test_aKnownKeyWhoseLevelsAreInStep_isReadFromThem_butALevelBehindTheStoreIsNotTrusted() {
        var machine = Machine(levelNames: ["memory", "database"], debouncedLevels: [1], keptValues: 1)
        _ = machine.observe(K.a, fresh: .init())
        let write = machine.submit(.write(stored("1")), for: K.a, now: now)
        XCTAssertEqual(write.effects?.debounce.map(\.level), [1], "the database write waits for its timer")
        _ = finishChanges(&machine, K.a)
        _ = machine.takeLevelOps(of: K.a)
        _ = machine.takeLevelOps(of: K.a)

        guard case .read(_, inStep: true) = machine.beginLevelRead(K.a, level: 0) else {
            return XCTFail("the memory level holds what the store confirmed: it may be read")
        }
        guard case .read(_, inStep: false) = machine.beginLevelRead(K.a, level: 1) else {
            return XCTFail("the database is behind until its debounced write lands: its hit is not trusted")
        }
    }

    // MARK: Saved by intent

    func test_aFetchedValue_isWrittenToADebouncedLevelAtOnce_andItsCallersWaitForTheSave() throws {
        var machine = Machine(levelNames: ["memory", "database"], debouncedLevels: [1], keptValues: 0)
        let answered = Locked(0)
        let fetch = machine.beginFetch(K.a, joining: true) { _ in answered.withLock { $0 += 1 } }

        let effects = try XCTUnwrap(
            machine.submit(.fetched(ValueBox("v"), fetch: fetch.fetch), for: K.a, now: now).effects)
        let ops = try XCTUnwrap(machine.takeLevelOps(of: K.a)).ops

        XCTAssertTrue(effects.debounce.isEmpty, "no timer: the value is written at once")
        guard
            case .save(let v, _, levels: 0..<2, skipsDebounced: false, let ticket?, answersFetch: true, let mark) =
                ops.first,
            !mark.stale,
            (v as? ValueBox<String>)?.value == "v"
        else { return XCTFail("expected one save to both levels, with the callers' ticket: \(ops)") }
        XCTAssertTrue(effects.fetchReplies.isEmpty, "the callers are answered through the ticket")
        ticket.release()
        XCTAssertEqual(answered.withLock { $0 }, 1, "answered once the save is issued and done")
    }

    func test_aWriteWaitsForTheDebounce_andAFlushIssuesIt() throws {
        var machine = Machine(levelNames: ["memory", "database"], debouncedLevels: [1], keptValues: 0)
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        guard case .save(_, _, _, _, _, _, let mark)? = machine.takeLevelOps(of: K.a)?.ops.head else {
            return XCTFail("expected the memory level's save")
        }
        _ = machine.saveLanded(K.a, mark: mark, failed: false, at: now)  // the memory level saved it
        XCTAssertNil(machine.takeLevelOps(of: K.a))
        let flushed = Locked(false)
        let ticket = Machine.SaveTicket(.run { flushed.withLock { $0 = true } })

        let effects = try XCTUnwrap(machine.submit(.flush(ticket), for: K.a, now: now).effects)
        let ops = try XCTUnwrap(machine.takeLevelOps(of: K.a)).ops

        XCTAssertEqual(effects.cancels.count, 1, "the timer is cancelled")
        guard case .flush(let v, _, level: 1, ticket: let held?, _) = ops.first, (v as? ValueBox<String>)?.value == "1"
        else {
            return XCTFail("expected the database write, now: \(ops)")
        }
        for released in effects.released { released.release() }
        XCTAssertFalse(flushed.withLock { $0 }, "the write is not done yet")
        held.release()
        XCTAssertTrue(flushed.withLock { $0 })
    }

    func test_aFlush_waitsForTheSavesOnTheirWayWhenItCame() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let issued = try XCTUnwrap(machine.takeLevelOps(of: K.a)?.ops.head)  // issued, not landed yet
        XCTAssertEqual(machine.keysToFlush(), [K.a], "a key with saves on their way is flushed")
        let ticket = Machine.SaveTicket(.run {})

        let effects = try XCTUnwrap(machine.submit(.flush(ticket), for: K.a, now: now).effects)

        XCTAssertTrue(effects.released.isEmpty, "the flush waits")
        guard case .save(_, _, let levels, _, _, _, let mark) = issued else { return XCTFail("expected a save") }
        XCTAssertEqual(levels, 0..<2)
        let first = machine.saveLanded(K.a, matching: nil, mark: mark, failed: false, at: now)
        XCTAssertTrue(first.flushed.isEmpty, "one level still saves it")
        let second = machine.saveLanded(K.a, matching: nil, mark: mark, failed: false, at: now)
        XCTAssertEqual(second.flushed.count, 1, "done once both levels saved it")
    }

    func test_aClearThatDropsAFetchsWrites_stillAnswersItsCallers() throws {
        var machine = makeMachine()
        let answered = Locked(0)
        _ = machine.submit(.write(stored("x")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        _ = machine.takeLevelOps(of: K.a)  // a caller is issuing the key's operations
        let fetch = machine.beginFetch(K.a, joining: true) { _ in answered.withLock { $0 += 1 } }
        // Its write waits for that caller.
        _ = machine.submit(.fetched(ValueBox("v"), fetch: fetch.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        let cleared = machine.clear {}

        XCTAssertEqual(cleared.released.count, 1, "the dropped write's ticket is released")
        for ticket in cleared.released { ticket.release() }
        XCTAssertEqual(answered.withLock { $0 }, 1, "the callers are answered, not left waiting for a write")
    }

    // MARK: Bounded memory

    func test_anEntryIsDroppedOnceNothingNeedsIt() {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        issueAndLand(&machine, K.a)
        XCTAssertEqual(machine.count, 1, "observed")

        _ = machine.stopObserving(K.a)

        XCTAssertEqual(machine.count, 0)
    }

    func test_keptValues_keepsTheLastKeysToFallOutOfUse() {
        var machine = Machine(levelNames: [], debouncedLevels: [], keptValues: 2)
        for key in [K.a, K.b, K.c] {
            _ = machine.submit(.write(stored("\(key)")), for: key, now: now)
            _ = finishChanges(&machine, key)
        }
        XCTAssertEqual(machine.count, 2)
        XCTAssertNil(machine.shown(K.a))
        XCTAssertEqual(machine.shown(K.c)?.confirmed.text, "\(K.c)")
    }

    func test_aKeptKey_isHeldAsItsRecordOnceAnotherFallsOutOfUse_whichAHitReads_andItsNextEventMakesAnEntry()
        throws
    {
        var machine = Machine(levelNames: [], debouncedLevels: [], keptValues: 2)
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        XCTAssertNotNil(machine.peek(K.a), "the last key to fall out of use stays an entry")
        _ = machine.submit(.write(stored("2")), for: K.b, now: now)
        _ = finishChanges(&machine, K.b)
        let kept = try XCTUnwrap(machine.record(K.a), "the value is kept")
        XCTAssertNil(machine.peek(K.a), "as a record alone: nothing is under way")
        XCTAssertNotNil(kept.keptStamp)

        guard case .answer(let hit) = machine.firstLook(K.a, under: .cacheFirst, now: now) else {
            return XCTFail("a kept value answers a hit")
        }
        XCTAssertEqual(hit.text, "1")
        XCTAssertNil(machine.peek(K.a), "a hit reads the record as it is")
        XCTAssertFalse(machine.invalidate(K.a, at: now).observed)
        XCTAssertEqual(machine.shown(K.a)?.isStale, true, "an invalidation marks the record")
        XCTAssertNil(machine.peek(K.a))

        let shown = try XCTUnwrap(machine.observe(K.a, fresh: .init())?.shown)
        let entry = try XCTUnwrap(machine.peek(K.a), "an observer makes the key an entry again")
        XCTAssertEqual(entry.generation, kept.generation, "the same key's, not a new one")
        XCTAssertEqual(entry.keptStamp, kept.keptStamp, "still counted among the kept values")
        XCTAssertEqual(shown.confirmed.text, "1")
        XCTAssertTrue(shown.isStale)
        XCTAssertGreaterThanOrEqual(shown.version, hit.version, "versions only grow")
        XCTAssertEqual(machine.count, 2)
    }

    // MARK: Invalidation

    func test_invalidatingAnObservedKey_asksForItsRefetch_andAnUnobservedOneIsOnlyMarked() {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = machine.submit(.write(stored("2")), for: K.b, now: now)

        XCTAssertTrue(machine.invalidate(K.a, at: now).observed)
        XCTAssertFalse(machine.invalidate(K.b, at: now).observed)
        XCTAssertEqual(machine.shown(K.b)?.isStale, true)
        guard case .held = machine.firstLook(K.b, under: .cacheFirst, now: now) else {
            return XCTFail("a cache-first read of a stale value does not answer at once: it fetches")
        }
        guard case .answer(let response) = machine.firstLook(K.b, under: .cacheOnly, now: now) else {
            return XCTFail("a cache-only read takes a stale value")
        }
        XCTAssertEqual(response.text, "2")
    }

    func test_anUpdateAskedBeforeAnInvalidation_leavesTheKeyStale_whenItIsAppliedAfter() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        let work = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)

        _ = machine.invalidate(K.a, at: now)
        _ = machine.commit(work, result: work.run(), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1+u")
        XCTAssertEqual(machine.shown(K.a)?.isStale, true, "the update was asked before the invalidation")
    }

    /// A read asked before an invalidation whose fetch begins after it (it waited its turn, or read the levels)
    /// stands after the invalidation, for freshness and for the changes it applies again alike: what it brings is
    /// fresh, no refetch is owed, a change asked before the invalidation is replaced, one asked after is applied
    /// again.
    func test_aFetchForAReadAskedBeforeAnInvalidation_standsAfterIt() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        _ = machine.submit(.write(stored("0")), for: K.a, now: now)
        let asked = machine.readStamp
        let before = try XCTUnwrap(machine.submit(update { ($0 ?? "") + "+before" }, for: K.a, now: now).work)
        XCTAssertTrue(machine.invalidate(K.a, at: now).observed)
        let read = machine.beginFetch(K.a, joining: false, asked: asked) { _ in }
        XCTAssertNil(machine.beginRefetch(K.a) { _ in }, "the read's fetch is in flight")
        _ = machine.commit(before, result: before.run(), for: K.a, now: now)  // applied while the fetch runs

        let after = try XCTUnwrap(machine.submit(update { ($0 ?? "") + "+after" }, for: K.a, now: now).work)
        _ = machine.commit(after, result: after.run(), for: K.a, now: now)
        let rebase = try XCTUnwrap(machine.submit(.fetched(ValueBox("1"), fetch: read.fetch), for: K.a, now: now).work)
        let effects = machine.commit(rebase, result: rebase.run(), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1+after")
        XCTAssertEqual(machine.shown(K.a)?.isStale, false, "its request went out after the invalidation")
        XCTAssertEqual(effects.refetches, 0, "no refetch is owed")
    }

    /// A fetch that began before an invalidation, then found the network down and waited, sends its request after
    /// the invalidation: what it brings is fresh, and no refetch is owed (the invalidation, made while the fetch
    /// counted as sent, had owed one).
    func test_aFetchThatWaitedForTheNetwork_sentAfterAnInvalidation_owesNoRefetch() throws {
        var machine = makeMachine()
        let read = fetchInFlightWhenObservedKeyIsInvalidated(&machine)
        machine.fetchWaits(read, of: K.a)
        machine.fetchSent(read, of: K.a)

        var save: Machine.LevelOp?
        let effects = try XCTUnwrap(machine.fetchedAtOnce(ValueBox("1"), fetch: read, for: K.a, now: now, save: &save))

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1")
        XCTAssertEqual(machine.shown(K.a)?.isStale, false, "its request went out after the invalidation")
        XCTAssertEqual(effects.refetches, 0, "no refetch is owed")
    }

    /// A fetch that began while the network was down, in a store that watches the connectivity, sends its request
    /// only once its upstream load starts and finds the network back: an invalidation in between owes no refetch
    /// (whose answer would replace a write made meanwhile).
    func test_aFetchSentWhenItsUpstreamLoadStarts_afterAnInvalidation_owesNoRefetch() {
        var machine = makeMachine()
        let read = fetchInFlightWhenObservedKeyIsInvalidated(&machine)
        machine.fetchSendsNow(read, of: K.a)
        _ = machine.submit(.write(stored("written")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)

        let step = machine.submit(.fetched(ValueBox("1"), fetch: read), for: K.a, now: now)
        let effects = (step.effects.map { [$0] } ?? []) + finishChanges(&machine, K.a)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "written", "the write is applied again to the answer")
        XCTAssertEqual(machine.shown(K.a)?.isStale, false)
        XCTAssertEqual(effects.map(\.refetches).filter { $0 != 0 }, [], "no refetch is owed")
    }

    /// The same fetch, in a store that answers from its cache, found the network down when its upstream load started:
    /// it fails, and the invalidation made since it began owes no refetch (offline, nothing is fetched for it).
    func test_aFetchThatFailsOfflineWhenItsUpstreamLoadStarts_owesNoRefetch() {
        var machine = makeMachine()
        let read = fetchInFlightWhenObservedKeyIsInvalidated(&machine)

        machine.fetchWaits(read, of: K.a)
        XCTAssertNil(machine.beginRefetch(K.a) { _ in }, "an invalidation made now owes nothing either")
        let effects = machine.fetchFailed(read, of: K.a, with: OfflineError())

        XCTAssertEqual(effects.refetches, 0)
    }

    /// A refetch owed before a fetch began stays owed when that fetch waits for the network, and when it fails: the
    /// fetch sent before the invalidation still owes its observers a fresh value once it ends.
    func test_aRefetchOwedBeforeAFetchThatWaits_isStillOwed() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())
        let old = machine.beginFetch(K.a, joining: false) { _ in }
        XCTAssertTrue(machine.invalidate(K.a, at: now).observed)
        XCTAssertNil(machine.beginRefetch(K.a) { _ in }, "owed: the fetch in flight was sent before")
        let waiting = machine.beginFetch(K.a, joining: false) { _ in }
        machine.fetchWaits(waiting.fetch, of: K.a)
        machine.fetchSent(waiting.fetch, of: K.a)
        _ = machine.fetchFailed(waiting.fetch, of: K.a, with: TestError(id: 1))

        var save: Machine.LevelOp?
        let effects = try XCTUnwrap(
            machine.fetchedAtOnce(ValueBox("1"), fetch: old.fetch, for: K.a, now: now, save: &save))

        XCTAssertNotEqual(effects.refetches, 0, "the owed refetch begins")
    }

    func test_aReadsFirstLook_tellsAKeyTheStoreDoesNotHold_fromOneWhoseValueDoesNotAnswer() {
        var machine = makeMachine()
        guard case .notHeld = machine.firstLook(K.a, under: .cacheFirst, now: now) else {
            return XCTFail("a key never seen is not held")
        }
        _ = machine.observe(K.a, fresh: .init())
        guard case .held = machine.firstLook(K.a, under: .cacheFirst, now: now) else {
            return XCTFail("an observed key with no value is held, and its value does not answer")
        }
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        guard case .answer(let response) = machine.firstLook(K.a, under: .cacheFirst, now: now) else {
            return XCTFail("a fresh value answers a cache-first read")
        }
        XCTAssertEqual(response.text, "1")
        guard case .held = machine.firstLook(K.a, under: .networkFirst, now: now) else {
            return XCTFail("a network-first read never answers from the store at once")
        }
    }

    func test_aFetchStartedBeforeAnInvalidation_leavesTheValueStale_oneStartedAfterMakesItFresh() {
        var machine = makeMachine()
        let before = machine.beginFetch(K.a, joining: true) { _ in }
        _ = machine.invalidate(K.a, at: now)
        let after = machine.beginFetch(K.a, joining: false) { _ in }

        _ = machine.submit(.fetched(ValueBox("old"), fetch: before.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        XCTAssertEqual(machine.shown(K.a)?.isStale, true, "what the older fetch brought is shown, stale")

        _ = machine.submit(.fetched(ValueBox("new"), fetch: after.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        XCTAssertEqual(machine.shown(K.a)?.isStale, false)
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "new")
    }

    func test_aLevelHitReadWhileAnotherKeyWasInvalidated_isConfirmedFresh() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)
        _ = machine.invalidate(K.b, at: now)
        let (mark, keys, _) = machine.beginInvalidation({ $0 as? Int == 99 }, at: now)
        XCTAssertEqual(machine.markStale(keys.filter { $0 == 99 }, mark: mark), [])

        _ = machine.submit(hit("cached", stamp), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.isStale, false, "no invalidation matched the key")
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "cached")
    }

    func test_aLevelHitReadWhileItsKeyWasInvalidated_isConfirmedStale() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)
        _ = machine.invalidate(K.a, at: now)

        _ = machine.submit(hit("cached", stamp), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.isStale, true)
    }

    func test_aLevelHitReadWhileEveryKeyWasInvalidated_isConfirmedStale() throws {
        var machine = makeMachine()
        let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)
        _ = machine.invalidateAll(at: now)

        _ = machine.submit(hit("cached", stamp), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.isStale, true)
    }

    func test_aLevelHitReadWhileAPredicateMatchedItsKey_isStale_whicheverEndsFirst() throws {
        for judgedFirst in [true, false] {
            var machine = makeMachine()
            let stamp = try XCTUnwrap(machine.beginLevelRead(K.a, level: 1).stamp)
            let (mark, keys, _) = machine.beginInvalidation({ $0 as? Int == K.a }, at: now)
            XCTAssertEqual(keys, [K.a], "a key being read is held, so the predicate judges it")

            if judgedFirst { _ = machine.markStale(keys, mark: mark) }
            _ = machine.submit(hit("cached", stamp), for: K.a, now: now)
            if !judgedFirst { _ = machine.markStale(keys, mark: mark) }

            XCTAssertEqual(machine.shown(K.a)?.isStale, true, judgedFirst ? "judged first" : "judged last")
        }
    }

    func test_theLevelsValueAChangeReadsWhileAnotherKeyWasInvalidated_isFresh_whileItsKeyWasInvalidated_isStale() {
        for invalidated in [K.b, K.a] {
            var machine = makeMachine()
            let step = machine.submit(update { $0.map { $0 + "+live" } }, for: K.a, now: now)
            guard case .loadBase(let generation) = step else { return XCTFail("expected a level read, got \(step)") }
            _ = machine.invalidate(invalidated, at: now)

            _ = machine.commitBase(
                CachedValue("saved", savedAt: now.addingTimeInterval(-1)).boxed, level: 1, generation: generation,
                staleSince: nil, for: K.a)
            _ = finishChanges(&machine, K.a)

            XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "saved+live")
            // The update confirms a local change: a change makes the value fresh only when asked after the mark.
            XCTAssertEqual(machine.shown(K.a)?.isStale, invalidated == K.a, "invalidated \(invalidated)")
        }
    }

    func test_aStaleValueWrittenToTheLevels_keepsItsEntryUntilTheWriteLands_thenIsRecordedStale() throws {
        var machine = makeMachine()
        let fetch = machine.beginFetch(K.a, joining: true) { _ in }
        _ = machine.invalidate(K.a, at: now)
        _ = machine.submit(.fetched(ValueBox("old"), fetch: fetch.fetch), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        let ops = try XCTUnwrap(machine.takeLevelOps(of: K.a)).ops
        guard case .save(_, _, _, _, _, _, let mark) = ops.first, mark.stale else {
            return XCTFail("a stale save: \(ops)")
        }
        _ = machine.takeLevelOps(of: K.a)
        XCTAssertEqual(machine.count, 1, "two writes have not landed")

        let landed = now.addingTimeInterval(5)
        _ = machine.saveLanded(K.a, mark: mark, failed: false, at: landed)
        _ = machine.saveLanded(K.a, mark: mark, failed: false, at: landed)

        XCTAssertEqual(machine.count, 0)
        let rules = try XCTUnwrap(machine.staleRules(for: K.a))
        XCTAssertTrue(rules.isStale(K.a, savedAt: landed), "a level stamped the write before it landed")
        XCTAssertFalse(rules.isStale(K.a, savedAt: landed.addingTimeInterval(1)))
        XCTAssertFalse(try XCTUnwrap(machine.staleRules(for: K.b)).isStale(K.b, savedAt: now))
    }

    func test_revalidationTargets_areTheObservedKeysThatAreNotFresh_withoutAFetchInFlight() {
        var machine = makeMachine()
        for key in [K.fresh, K.old, K.stale, K.empty, K.fetching, K.unobserved] {
            _ = machine.observe(key, fresh: .init())
        }
        _ = machine.submit(.write(stored("v")), for: K.fresh, now: now)
        let old = StoredValue(value: "v", origin: .local, savedAt: now.addingTimeInterval(-120))
        _ = machine.submit(.write(old.boxed), for: K.old, now: now)
        _ = machine.submit(.write(stored("v")), for: K.stale, now: now)
        _ = machine.invalidate(K.stale, at: now)
        _ = machine.beginFetch(K.fetching, joining: true) { _ in }
        _ = machine.stopObserving(K.unobserved)

        let targets = machine.revalidationTargets(now: now, maxAgeSeconds: 60)

        XCTAssertEqual(Set(targets), [K.old, K.stale, K.empty])
        XCTAssertEqual(
            Set(machine.revalidationTargets(now: now, maxAgeSeconds: nil)), [K.fresh, K.old, K.stale, K.empty],
            "without a maximum age, every observed value")
    }

    // MARK: A write applied at once

    func test_aChangeOfAKeyNobodyObserves_publishesNothing_butAnsweringCallersStillGetWhatItShows() throws {
        var machine = makeMachine()
        var save: Machine.LevelOp?
        let written = try XCTUnwrap(machine.writeAtOnce(stored("1"), for: K.a, save: &save))
        XCTAssertTrue(written.allPublished.isEmpty, "no observer: no snapshot is made")

        let fetch = machine.beginFetch(K.b, joining: true) { _ in }
        let fetched = try XCTUnwrap(
            machine.submit(.fetched(ValueBox("2"), fetch: fetch.fetch), for: K.b, now: now).effects)
        XCTAssertEqual(fetched.allPublished.map(\.confirmed.text), ["2"], "the fetch's callers are answered with it")
        XCTAssertNil(fetched.published?.observed, "and it is sent to no observer")
    }

    func test_aWriteOfAKeyWhoseTurnIsFree_isAppliedAtOnce_withItsSaveTakenForTheWriter() throws {
        var machine = makeMachine()
        _ = machine.observe(K.a, fresh: .init())

        var save: Machine.LevelOp?
        let effects = try XCTUnwrap(machine.writeAtOnce(stored("1"), for: K.a, save: &save))

        XCTAssertEqual(effects.allPublished.map(\.confirmed.text), ["1"])
        XCTAssertTrue(effects.issueLevels)
        guard case .save(let value, _, let levels, _, _, _, _) = save else { return XCTFail("expected the save") }
        XCTAssertEqual((value as? ValueBox<String>)?.value, "1")
        XCTAssertEqual(levels, 0..<2)
        XCTAssertNil(machine.takeLevelOps(of: K.a), "nothing else to issue: the writer's issuing ends")
        _ = machine.stopObserving(K.a)
        XCTAssertEqual(machine.count, 1, "its save has not landed")
        land(save, &machine, K.a)
        XCTAssertEqual(machine.count, 0, "and the key, in use by nothing, is dropped")
    }

    func test_aFetchedValueOfAKeyWhoseTurnIsFree_isConfirmedAtOnce_withItsSaveTakenForItsCaller() throws {
        var machine = makeMachine()
        let answers = Locked<[String?]>([])
        let fetch = machine.beginFetch(K.a, joining: true) { result in
            answers.withLock { $0.append(try? result.get().confirmed.text) }
        }

        var save: Machine.LevelOp?
        let effects = try XCTUnwrap(
            machine.fetchedAtOnce(ValueBox("v"), fetch: fetch.fetch, for: K.a, now: now, save: &save))

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "v")
        XCTAssertTrue(effects.issueLevels)
        guard
            case .save(let v, _, levels: 0..<2, skipsDebounced: false, let ticket?, answersFetch: true, let mark) = save,
            !mark.stale, (v as? ValueBox<String>)?.value == "v"
        else {
            return XCTFail("expected the save to both levels, with the callers' ticket: \(String(describing: save))")
        }
        XCTAssertNil(machine.takeLevelOps(of: K.a), "nothing else to issue")
        XCTAssertEqual(answers.withLock { $0 }, [], "the caller waits for the save")
        ticket.release()
        XCTAssertEqual(answers.withLock { $0 }, ["v"])
        land(save, &machine, K.a)
        XCTAssertEqual(machine.count, 0, "the key, in use by nothing, is dropped")
    }

    func test_aFetchedValue_takesItsTurn_whenTheKeysChangesRun_orAChangeWasMadeDuringTheFetch() throws {
        var machine = makeMachine()
        var save: Machine.LevelOp?
        let running = machine.beginFetch(K.a, joining: true) { _ in }
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = finishChanges(&machine, K.a)
        XCTAssertNil(
            machine.fetchedAtOnce(ValueBox("fetched"), fetch: running.fetch, for: K.a, now: now, save: &save),
            "a write made during the fetch is applied again to what it brings: the value takes its turn")
        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1", "and nothing changed")

        _ = machine.submit(.write(stored("1")), for: K.b, now: now)
        _ = finishChanges(&machine, K.b)
        _ = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.b, now: now).work)
        let busy = machine.beginFetch(K.b, joining: true) { _ in }
        XCTAssertNil(
            machine.fetchedAtOnce(ValueBox("fetched"), fetch: busy.fetch, for: K.b, now: now, save: &save),
            "an update of the key runs: the value waits for its turn")

        let gone = machine.beginFetch(K.c, joining: true) { _ in }
        _ = machine.remove(K.c)
        XCTAssertNil(machine.fetchedAtOnce(ValueBox("fetched"), fetch: gone.fetch + 1, for: K.c, now: now, save: &save))
        XCTAssertNil(save, "no save is handed out when the value waits")
    }

    func test_aWriteWhileTheKeysChangesRun_changesNothing_soItCanWaitItsTurn() throws {
        var machine = makeMachine()
        _ = machine.submit(.write(stored("1")), for: K.a, now: now)
        _ = try XCTUnwrap(machine.submit(update { $0.map { $0 + "+u" } }, for: K.a, now: now).work)

        var save: Machine.LevelOp?
        XCTAssertNil(machine.writeAtOnce(stored("2"), for: K.a, save: &save))
        XCTAssertNil(save)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "1")
        XCTAssertTrue(machine.submit(.write(stored("2")), for: K.a, now: now).isQueued)
    }

    func test_aWriteWhileAnotherCallerIssuesTheKeysOperations_leavesThemToThatCaller() throws {
        var machine = makeMachine()
        var firstSave: Machine.LevelOp?
        let first = try XCTUnwrap(machine.writeAtOnce(stored("1"), for: K.a, save: &firstSave))
        XCTAssertTrue(first.issueLevels)

        var save: Machine.LevelOp?
        let second = try XCTUnwrap(machine.writeAtOnce(stored("2"), for: K.a, save: &save))

        XCTAssertFalse(second.issueLevels)
        XCTAssertNil(save)
        XCTAssertEqual(machine.takeLevelOps(of: K.a)?.ops.count, 1, "the first writer issues the second save next")
    }

    func test_aWriteDuringAFetch_isAppliedToWhatTheFetchBrings() throws {
        var machine = makeMachine()
        let fetch = machine.beginFetch(K.a, joining: true) { _ in }
        var save: Machine.LevelOp?
        _ = try XCTUnwrap(machine.writeAtOnce(stored("written"), for: K.a, save: &save))

        _ = machine.submit(.fetched(ValueBox("fetched"), fetch: fetch.fetch), for: K.a, now: now)

        XCTAssertEqual(machine.shown(K.a)?.confirmed.text, "written", "the write came after the fetch began")
    }

    // MARK: Helpers

    private func makeMachine() -> Machine {
        Machine(levelNames: ["memory", "disk"], debouncedLevels: [], keptValues: 0)
    }

    private func stored(_ value: String) -> StoredValue<any StoreValueBox> {
        StoredValue(value: value, origin: .local, savedAt: now).boxed
    }

    private func update(_ change: @escaping @Sendable (String?) -> String?) -> Machine.Job {
        .update({ change(($0 as? ValueBox<String>)?.value).map { ValueBox($0) } }, reply: nil, replays: true)
    }

    private func external(_ value: String?, _ stamp: Machine.ReadStamp) -> Machine.Job {
        .external(value.map { CachedValue($0, savedAt: now).boxed }, level: 1, stamp: stamp)
    }

    private func hit(_ value: String, _ stamp: Machine.ReadStamp) -> Machine.Job {
        .hit(
            CachedValue(value, savedAt: now).boxed, level: 1, stamp: stamp, staleSince: nil, error: nil, reply: { _ in }
        )
    }

    /// An observed key `a` whose read's fetch began, then an invalidation of it while that fetch was in flight: no
    /// refetch begins (the fetch is in flight). Returns the read's fetch.
    private func fetchInFlightWhenObservedKeyIsInvalidated(
        _ machine: inout Machine, file: StaticString = #filePath, line: UInt = #line
    ) -> Int {
        _ = machine.observe(K.a, fresh: .init())
        let read = machine.beginFetch(K.a, joining: false) { _ in }
        XCTAssertTrue(machine.invalidate(K.a, at: now).observed, file: file, line: line)
        XCTAssertNil(machine.beginRefetch(K.a) { _ in }, "the read's fetch is in flight", file: file, line: line)
        return read.fetch
    }

    /// Runs the key's queue to the end, as the store would (committing work with its closures' result).
    /// Takes `key`'s level operations, and lands each save they issue (as the levels answer), until none is left.
    private func issueAndLand(_ machine: inout Machine, _ key: Int) {
        while let taken = machine.takeLevelOps(of: key) {
            for operation in taken.ops { land(operation, &machine, key) }
        }
    }

    /// Lands each save `operation` issues to the two levels of ``makeMachine()``.
    private func land(_ operation: Machine.LevelOp?, _ machine: inout Machine, _ key: Int) {
        switch operation {
        case .save(_, _, let levels, _, _, _, let mark):
            for _ in levels { _ = machine.saveLanded(key, mark: mark, failed: false, at: now) }
        case .flush(_, _, let level, _, let mark):
            _ = machine.saveLanded(key, matching: nil, mark: mark, failed: false, at: now, flushedLevel: level)
        case .remove(let levels, _, _, let mark):
            for _ in levels { _ = machine.saveLanded(key, mark: mark, failed: false, at: now) }
        case .waitForSaves(let ticket):
            if !machine.flushWaits(ticket, for: key) { ticket.release() }
        case nil: break
        }
    }

    private func finishChanges(_ machine: inout Machine, _ key: Int) -> [Machine.Effects] {
        var all: [Machine.Effects] = []
        while let step = machine.nextChange(of: key, now: now) {
            switch step {
            case .applied(let effects): all.append(effects)
            case .run(let work): all.append(machine.commit(work, result: work.run(), for: key, now: now))
            case .loadBase, .queued: return all
            }
        }
        return all
    }
}

extension StoreMachine.Step {
    fileprivate var effects: StoreMachine.Effects? {
        if case .applied(let effects) = self { return effects }
        return nil
    }

    fileprivate var work: StoreMachine.Work? {
        if case .run(let work) = self { return work }
        return nil
    }

    fileprivate var isQueued: Bool {
        if case .queued = self { return true }
        return false
    }
}

extension StoreMachine.FetchStart {
    fileprivate var fetch: Int { joinedFetch?.id ?? 0 }
    fileprivate var caller: Int { joinedFetch?.caller ?? 0 }
}

extension StoreMachine.LastLevelMiss {
    fileprivate var learnedSnapshot: StoreMachine.Snapshot? {
        if case .learned(let snapshot) = self { return snapshot }
        return nil
    }

    fileprivate var begun: StoreMachine.FetchStart? {
        if case .fetch(let begun) = self { return begun }
        return nil
    }
}

extension StoreMachine.LevelRead {
    fileprivate var stamp: StoreMachine.ReadStamp? {
        if case .read(let stamp, _) = self { return stamp }
        return nil
    }
}

extension StoreMachine.Effects {
    /// Every snapshot to publish, in order.
    fileprivate var allPublished: [StoreMachine.Snapshot] { (published.map { [$0] } ?? []) + publishedLater }
}

/// The keys of the machine's tests, by their slots.
private enum K {
    static let a = 0
    static let b = 1
    static let c = 2
    static let fetching = 4
    static let fresh = 5
    static let old = 6
    static let stale = 7
    static let unobserved = 8
    static let empty = 10
}

extension StoreMachine {
    /// An invalidation of `key` alone, as the store makes one.
    fileprivate mutating func invalidate(_ key: Int, at date: Date) -> (observed: Bool, garbage: Invalidation?) {
        invalidate(key, matching: { ($0 as? Int) == key }, at: date)
    }

    /// A save of `key` landed, as the store tells it.
    fileprivate mutating func saveLanded(_ key: Int, mark: SaveMark, failed: Bool, at date: Date) -> Invalidation? {
        saveLanded(key, matching: { ($0 as? Int) == key }, mark: mark, failed: failed, at: date).folded
    }
}

extension StoreResponse where Value == any StoreValueBox {
    /// The value, as the machine's tests write it.
    fileprivate var text: String? { (box as? ValueBox<String>)?.value }
}
