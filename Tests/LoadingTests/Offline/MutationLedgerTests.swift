import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// What a mutation queue knows, step by step, with no thread, storage or store: the invariants written at the top of
/// `MutationLedger`.
final class MutationLedgerTests: XCTestCase {
    private struct Refusal: Error {}

    private var ledger = MutationLedger()

    /// Adds a mutation, its save landed, and shows it with its commit there: ready to be sent.
    @discardableResult
    private func addShown(_ input: String, id: String? = nil) -> StoredMutation<String> {
        let (record, saves, clears) = ledger.add(input, id: id ?? input, createdAt: Date(), completion: { _ in })
        saves.leave()
        XCTAssertTrue(ledger.markShown(record.id, undo: AnyCancellationToken {}, numberedBefore: clears))
        ledger.keepCommit({ _ in }, of: record.id)
        return StoredMutation(record)
    }

    private func begin(byBudget: Bool = false) -> (record: StoredMutation<String>, serial: Int)? {
        guard case .attempt(let record, let serial, let saves) = ledger.beginAttempt(byBudget: byBudget) else {
            return nil
        }
        saves.leave()
        return (StoredMutation(record), serial)
    }

    func test_aRecordTheLedgerKeeps_comesBackWhole_evenWithAnOptionalOrAnExistentialInput() {
        func stored<Input>(_ input: Input) -> StoredMutation<Input> {
            StoredMutation(
                id: "a", sequence: 3, input: input, createdAt: Date(timeIntervalSince1970: 9), attempts: 2,
                serverID: "s", resends: 1, awaitsResolution: true)
        }
        XCTAssertEqual(StoredMutation<Int?>(stored(nil as Int?).erased), stored(nil as Int?))
        XCTAssertEqual(StoredMutation<Int?>(stored(5 as Int?).erased), stored(5 as Int?))
        XCTAssertEqual(StoredMutation<[String]>(stored(["x"]).erased), stored(["x"]))
        let existential = StoredMutation<any Sendable>(stored("x" as any Sendable).erased)
        XCTAssertEqual(existential.input as? String, "x")
    }

    func test_mutationsAreNumberedInOrder_andTheFirstIsSentFirst() {
        ledger.restore([
            StoredMutation(id: "kept", sequence: 4, input: "kept", createdAt: Date(), attempts: 2)
        ])
        ledger.keepCommit({ _ in }, of: "kept")
        let added = addShown("new")
        XCTAssertEqual(added.sequence, 5, "numbered after what the storage kept")
        XCTAssertEqual(ledger.list.map(\.id), ["kept", "new"])
        XCTAssertEqual(begin()?.record.id, "kept")
    }

    func test_oneAttemptAtATime_andNoneBeforeItsCommitIsThere() {
        let (record, _, _) = ledger.add("a", id: "a", createdAt: Date(), completion: { _ in })
        guard case .none = ledger.beginAttempt(byBudget: false) else { return XCTFail("sent before it was shown") }
        ledger.keepCommit({ _ in }, of: record.id)
        XCTAssertNotNil(begin())
        guard case .none = ledger.beginAttempt(byBudget: false) else { return XCTFail("a second attempt began") }
    }

    func test_aConflict_holdsTheQueue_untilItIsResolved_onceWhicheverWay() {
        addShown("a")
        addShown("b")
        let first = begin()!

        XCTAssertNotNil(ledger.conflict(first.serial, with: Refusal(), serverCopy: "copy"))
        XCTAssertNil(ledger.conflict(first.serial, with: Refusal(), serverCopy: "copy"), "one answer per attempt")
        XCTAssertNil(begin(), "nothing is sent while the conflict waits, the next neither")
        XCTAssertEqual(ledger.conflicted("a")?.serverCopy as? String, "copy", "kept for a rebase")
        let asked = ledger.awaitResolution("a")
        asked?.saves.leave()
        XCTAssertEqual(asked?.record.awaitsResolution, true)
        XCTAssertEqual(ledger.list.map(\.awaitsResolution), [true, false])

        let resent = ledger.resend("a", input: "a2")
        resent?.saves.leave()
        XCTAssertEqual(resent?.record.resends, 1)
        XCTAssertEqual(resent?.record.idempotencyKey, "a.1")
        XCTAssertNil(ledger.resend("a", input: nil), "resolved once")
        XCTAssertNil(ledger.giveWay("a"))
        XCTAssertEqual(begin()?.record.input, "a2", "sent again, merged")

        XCTAssertNil(begin(), "one attempt at a time")
    }

    func test_aConflictGivingWay_isNotSentAgain_whileTheStoreSettlesIt() {
        addShown("a")
        let first = begin()!
        XCTAssertNotNil(ledger.conflict(first.serial, with: Refusal(), serverCopy: "copy"))

        XCTAssertNotNil(ledger.giveWay("a")?.commit, "the commit to fail")
        XCTAssertNil(ledger.giveWay("a"), "given way once")
        XCTAssertNil(begin(), "its commit is gone: not sent")
    }

    func test_aRestoredMutationWaitingForTheApp_holdsTheQueue() {
        ledger.restore([
            StoredMutation(
                id: "kept", sequence: 0, input: "kept", createdAt: Date(), attempts: 1, awaitsResolution: true)
        ])
        ledger.keepCommit({ _ in }, of: "kept")
        XCTAssertNil(begin())
        XCTAssertEqual(ledger.list.first?.awaitsResolution, true)
        ledger.resend("kept", input: nil)?.saves.leave()
        XCTAssertEqual(begin()?.record.id, "kept")
    }

    func test_aLateAnswerOfAnAttemptTakenBack_changesNothing() {
        addShown("a")
        let first = begin()!
        XCTAssertNotNil(ledger.takeBackAttempt())
        XCTAssertEqual(ledger.list.first?.status, .waiting)
        let second = begin()!
        XCTAssertNotEqual(first.serial, second.serial)

        XCTAssertNil(ledger.answer(first.serial), "the answer of the attempt taken back")
        XCTAssertFalse(ledger.recordAttempt(first.serial, attempts: 9, lease: nil))
        XCTAssertNil(ledger.failForNow(first.serial, with: Refusal()))
        XCTAssertTrue(ledger.recordAttempt(second.serial, attempts: 1, lease: nil))
        XCTAssertEqual(ledger.list.first?.attempts, 1)
        XCTAssertEqual(ledger.list.first?.status, .sending)
        XCTAssertNotNil(ledger.answer(second.serial)?.1, "the commit to complete")
    }

    func test_aTransientFailure_keepsTheMutationFirst_andWaitsForTheRetry() {
        addShown("a")
        addShown("b")
        let attempt = begin()!
        XCTAssertTrue(ledger.recordAttempt(attempt.serial, attempts: 1, lease: nil))
        XCTAssertEqual(ledger.failForNow(attempt.serial, with: Refusal())?.attempts, 1)
        XCTAssertEqual(ledger.list.map(\.status), [.waiting, .waiting])
        XCTAssertTrue(ledger.list.first?.lastError is Refusal)
        guard case .none = ledger.beginAttempt(byBudget: false) else { return XCTFail("sent while waiting") }

        XCTAssertTrue(ledger.keepRetry(AnyCancellationToken {}))
        XCTAssertNotNil(ledger.endWaitToRetry(), "the timer, to cancel")
        XCTAssertFalse(ledger.keepRetry(AnyCancellationToken {}), "a timer made after the wait ended is not kept")
        XCTAssertEqual(begin()?.record.id, "a")
    }

    func test_removingTheFirst_endsTheWaitForItsRetry_andItsAttempt() {
        addShown("a")
        addShown("b")
        let attempt = begin()!
        _ = ledger.failForNow(attempt.serial, with: Refusal())
        XCTAssertTrue(ledger.keepRetry(AnyCancellationToken {}))

        let removedSecond = ledger.remove("b")
        XCTAssertNotNil(removedSecond.entry)
        XCTAssertNil(removedSecond.retry, "the second was not waited for")
        let removedFirst = ledger.remove("a")
        XCTAssertNotNil(removedFirst.retry)
        XCTAssertTrue(ledger.isEmpty)
        XCTAssertNil(ledger.remove("a").entry)
    }

    func test_aClear_takesEverything_stopsSending_andTellsOnlyWhatWasShown() {
        addShown("a")
        let (hidden, saves, _) = ledger.add("b", id: "b", createdAt: Date(), completion: { _ in })
        let attempt = begin()!
        let taken = ledger.beginClear()
        XCTAssertEqual(taken.entries.map(\.record.id), ["a", "b"])
        XCTAssertEqual(taken.attempt?.serial, attempt.serial)
        XCTAssertTrue(ledger.isEmpty)

        // The save of "b" was under way when the clear began: it is among the saves the clear waits for.
        XCTAssertEqual(taken.saves.wait(timeout: .now()), .timedOut)
        saves.leave()
        XCTAssertEqual(taken.saves.wait(timeout: .now()), .success)
        XCTAssertFalse(ledger.markShown(hidden.id, undo: AnyCancellationToken {}, numberedBefore: 0))

        addShown("c")
        guard case .none = ledger.beginAttempt(byBudget: false) else { return XCTFail("sent during a clear") }
        ledger.keepCleared(taken.entries)
        XCTAssertEqual(ledger.endClear().map(\.record.id), ["a"], "only what was shown is told")
        XCTAssertEqual(begin()?.record.id, "c")
    }

    func test_aMutationNumberedBeforeAClear_isNotShownAfterIt() {
        let (record, saves, clears) = ledger.add("a", id: "a", createdAt: Date(), completion: { _ in })
        saves.leave()
        _ = ledger.beginClear()
        XCTAssertTrue(ledger.clearBegan(since: clears))
        XCTAssertFalse(ledger.markShown(record.id, undo: AnyCancellationToken {}, numberedBefore: clears))
        XCTAssertTrue(ledger.endClear().isEmpty)
    }

    func test_whileABudgetRuns_onlyItStartsAttempts_andItWaitsOnceItEnds() {
        addShown("a")
        let watcher = SendingWatcher<String>()
        ledger.beginBudget(watcher)
        guard case .heldForBudget = ledger.beginAttempt(byBudget: false) else { return XCTFail("not held") }
        XCTAssertEqual(ledger.nextStepWithinBudget().starts, true)
        let attempt = begin(byBudget: true)!
        XCTAssertEqual(ledger.nextStepWithinBudget().starts, false, "an attempt runs")
        XCTAssertNotNil(ledger.takeBackAttempt())

        let end = ledger.endBudget(watcher, isOnline: true)
        XCTAssertEqual(end.remaining.map(\.id), ["a"])
        XCTAssertTrue(end.waits, "the queue waits its first retry delay before sending on its own")
        XCTAssertNil(ledger.answer(attempt.serial))
        XCTAssertTrue(ledger.budgetWatchers.isEmpty)
    }

    func test_anotherProcessSending_orHavingSent() {
        addShown("a")
        let first = begin()!
        XCTAssertTrue(ledger.yieldToAnotherProcess(first.serial))
        XCTAssertFalse(ledger.yieldToAnotherProcess(first.serial), "once")
        XCTAssertEqual(ledger.list.map(\.id), ["a"])
        _ = ledger.endWaitToRetry()

        let second = begin()!
        XCTAssertEqual(ledger.sentElsewhere(second.serial)?.record.id, "a")
        XCTAssertTrue(ledger.isEmpty)
    }

    func test_aThousandSettledInTurn_leaveTheLastOneFirst() {
        for index in 0..<1_000 { addShown("m\(index)") }
        for index in 0..<999 {
            let attempt = begin()!
            XCTAssertEqual(attempt.record.id, "m\(index)")
            XCTAssertNotNil(ledger.answer(attempt.serial))
            XCTAssertEqual(ledger.remove("m\(index)").entry?.record.id, "m\(index)")
        }
        XCTAssertEqual(ledger.list.map(\.id), ["m999"])
    }
}
