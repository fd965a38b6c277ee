import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The store checked against ``StoreModel`` over random histories: a fixed budget of seeded histories here (what CI
/// runs), or a soak for a given time with `LOADING_MODEL_SOAK_SECONDS` (see the README and `Docs/Contributing.md`). A
/// disagreement is shrunk and printed as a test to paste below.
final class StoreModelCheckTests: XCTestCase {
    func test_randomHistories_agreeWithTheModel() {
        ModelCheck.soak("Model check") { seed, length in
            let network = ModelCheck.network(seed: seed)
            let keepsValues = ModelCheck.keepsValues(seed: seed)
            let levelMaxAge = ModelCheck.levelMaxAge(seed: seed)
            let history = ModelCheck.history(
                seed: seed, length: length, network: network, keepsValues: keepsValues, levelMaxAge: levelMaxAge)
            let run: ([Step]) -> ModelCheck.Disagreement<Step, Checkpoint>? = {
                ModelCheck.run($0, network: network, keepsValues: keepsValues, levelMaxAge: levelMaxAge)
            }
            guard let disagreement = run(history) else { return .agreed }
            let shrunk = ModelCheck.shrink(disagreement, simpler: \.simpler, run: run)
            var arguments = network == .always ? [] : ["network: \(network)"]
            if !keepsValues { arguments.append("keepsValues: false") }
            if let levelMaxAge { arguments.append("levelMaxAge: \(levelMaxAge)") }
            return .failed(
                """
                the store (network \(network), \(keepsValues ? "keeping values" : "keeping none")) disagreed with the \
                model (\(disagreement.history.count) steps, shrunk to \(shrunk.history.count)):
                \(shrunk)
                Paste as a test:
                \(ModelCheck.testCase(shrunk, seed: seed, assertion: "ModelCheck.assertAgrees",
                    arguments: arguments.joined(separator: ", ")))
                """)
        }
    }

    func test_randomQueueHistories_agreeWithTheModel() {
        ModelCheck.soak("Queue model check") { seed, length in
            let history = ModelCheck.queueHistory(seed: seed, length: length)
            // Every other seed, the creations' answers apply the changes pending again instead of rewriting the value.
            let rewritesValues = seed % 2 == 0
            guard let disagreement = ModelCheck.run(history, rewritesValues: rewritesValues) else { return .agreed }
            let shrunk = ModelCheck.shrink(disagreement, simpler: \.simpler) {
                ModelCheck.run($0, rewritesValues: rewritesValues)
            }
            return .failed(
                """
                the queue disagreed with the model (\(disagreement.history.count) steps, shrunk to \
                \(shrunk.history.count), rewriting the value's ids: \(rewritesValues)):
                \(shrunk)
                Paste as a test:
                \(ModelCheck.testCase(shrunk, seed: seed, assertion: "ModelCheck.assertQueueAgrees"))
                """)
        }
    }

    /// Two stores over one shared level, on files: fewer histories than the others fit the same time.
    func test_randomSharingHistories_agreeWithTheModel() {
        ModelCheck.soak("Sharing model check", histories: 200) { seed, length in
            let history = ModelCheck.sharingHistory(seed: seed, length: length / 4)
            guard let disagreement = ModelCheck.run(history) else { return .agreed }
            let shrunk = ModelCheck.shrink(disagreement, simpler: \.simpler, run: ModelCheck.run)
            return .failed(
                """
                the stores sharing a level disagreed with the model (\(disagreement.history.count) steps, shrunk to \
                \(shrunk.history.count)):
                \(shrunk)
                Paste as a test:
                \(ModelCheck.testCase(shrunk, seed: seed, assertion: "ModelCheck.assertSharingAgrees"))
                """)
        }
    }

    func test_randomPageHistories_agreeWithTheModel() {
        ModelCheck.soak("Page model check") { seed, length in
            // Every other history keeps at most three pages per list; one in four pairs grows its lists both ways.
            let maxPages = seed % 2 == 0 ? 3 : nil
            let bothWays = seed % 4 >= 2
            let history = ModelCheck.pageHistory(seed: seed, length: length, maxPages: maxPages, bothWays: bothWays)
            let run = { ModelCheck.run($0, maxPages: maxPages, bothWays: bothWays) }
            guard let disagreement = run(history) else { return .agreed }
            let shrunk = ModelCheck.shrink(disagreement, simpler: \.simpler, run: run)
            let arguments = (maxPages.map { ["maxPages: \($0)"] } ?? []) + (bothWays ? ["bothWays: true"] : [])
            return .failed(
                """
                the paged store (maxPages \(maxPages.map(String.init) ?? "nil"), both ways \(bothWays)) disagreed \
                with the model (\(disagreement.history.count) steps, shrunk to \(shrunk.history.count)):
                \(shrunk)
                Paste as a test:
                \(ModelCheck.testCase(
                    shrunk, seed: seed, assertion: "ModelCheck.assertPagesAgree",
                    arguments: arguments.joined(separator: ", ")))
                """)
        }
    }

    func test_concurrentHistories_areLinearizable() {
        ModelCheck.soak("Linearizability (3 threads of 4 operations)") { seed, _ in
            let network = LinearizabilityCheck.network(seed: seed)
            let threads = LinearizabilityCheck.threads(seed: seed, threads: 3, length: 4, network: network)
            let slow = seed % 2 == 0
            let (operations, final) = LinearizabilityCheck.run(threads, slow: slow, network: network)
            switch LinearizabilityCheck.linearization(of: operations, final: final, network: network) {
            case .linearizable: return .agreed
            case .undecided: return .undecided
            case .notLinearizable(let reason):
                return .failed(
                    """
                    \(slow ? "slow levels and network, " : "")network \(network): no sequential order of these \
                    operations explains their answers and what they left:
                    \(operations.sorted { $0.start < $1.start }.map(\.description).joined(separator: "\n"))
                    left: \(final)
                    \(reason)
                    """)
            }
        }
    }

    // MARK: Concurrent histories that once were not linearizable (each a defect of the store, fixed)

    /// A cache-first read that looked at the key before a write, and read the levels after it (its save not landed
    /// yet), fetched: the network's value replaced the write.
    func test_aCacheFirstReadRacingAWrite_isLinearizable() {
        assertLinearizable([[.read("a", .cacheFirst)], [.write("a", [2]), .read("a", .cacheFirst)]])
    }

    /// A removal while an update of the key ran dropped the update from its queue; the write asked after the removal
    /// took the update's place, and was dropped when the update ended.
    /// A fetch answered while changes of the key waited their turn; an invalidation meanwhile found it still in flight
    /// and owed a refetch, which began only once the answer was applied: the changes asked in between were neither
    /// before it (it did not apply them again) nor after it (its answer replaced them), and the accepted change was
    /// lost. Slow levels and network, as the soak found it. The same history, in CI, then found a cache-first read
    /// that waited its turn and found the key invalidated meanwhile: its fetch stood before the invalidation (where
    /// the read began), owed a refetch, and applied again a write made before the invalidation.
    func test_aRefetchOwedByAnAnswerThatWaitedItsTurn_appliesTheChangesAskedAfterTheInvalidation() {
        assertLinearizable(
            [
                [.read("a", .cacheFirst)],
                [.update("a", .insert(3)), .write("a", [2])],
                [.read("a", .cacheOnly), .write("a", [3]), .invalidate("a"), .mutate("a", .insert(0), accepted: true)],
            ], rounds: 600, slow: true)
    }

    /// A cache-first read that began before a change and an invalidation, and missed the levels after both, answered
    /// with the changed value although the invalidation had made it stale: it now fetches. Slow levels and network.
    func test_aReadThatLearnedAValueSinceItBegan_fetchesWhenAnInvalidationMadeItStale() {
        assertLinearizable(
            [
                [.read("a", .cacheFirst)],
                [.update("a", .insert(3)), .invalidate("a"), .mutate("a", .insert(0), accepted: true)],
            ], rounds: 1_000, slow: true)
    }

    /// Seed 9688 of the concurrent check: an optimistic change asked before a removal outlived it and was accepted
    /// after it, while a read asked before the removal fetched; the fetch's answer replaced the accepted change.
    func test_anOptimisticChangeThatOutlivesARemoval_isAppliedAgainToAFetchThatBeganAfterIt() {
        assertLinearizable(
            [
                [
                    .mutate("b", .delete(0), accepted: true), .remove("a"), .read("a", .cacheOnly),
                    .update("b", .insert(0)),
                ],
                [.write("b", [3]), .update("a", .insert(3)), .clear, .read("a", .cacheFirst)],
                [
                    .mutate("a", .insert(1), accepted: true), .read("b", .cacheOnly), .update("b", .insert(1)),
                    .read("b", .networkOnly),
                ],
            ], rounds: 300, slow: true)
    }

    /// Seed 138 of the concurrent check, offline: a network-first read whose fetch failed (no network) fell back on
    /// what the key showed while a write asked before the failure still waited behind a slow update, and answered
    /// with nothing. A read whose fetch fails now waits for the changes asked before the failure.
    func test_aReadWhoseFetchFailed_seesTheChangesAskedBeforeTheFailure() {
        assertLinearizable(
            [
                [.read("b", .networkFirst), .invalidate("a"), .read("a", .networkOnly), .invalidate("a")],
                [.update("b", .delete(0)), .read("b", .networkFirst), .clear, .clear],
                [
                    .write("b", [1]), .connectivity(online: false), .write("a", [3]),
                    .mutate("a", .insert(2), accepted: true),
                ],
            ], rounds: 500, slow: true)
    }

    func test_aWriteAfterARemovalWhileAnUpdateRuns_isLinearizable() {
        assertLinearizable([[.update("a", .insert(1))], [.remove("a"), .write("a", [3])]])
    }

    /// Runs `threads` `rounds` times, failing at the first run no sequential order explains.
    /// Operations a soak recorded (seed 27134, slow levels and network) that the store ran correctly and the
    /// checker once rejected: a read overtaken by a clear answered with what the store showed when it answered, a
    /// moment after its request's answer was discarded, and the invalidation's refetch, owed until that request
    /// ended, began between the two updates. The checker took the read's answer at the request's answer.
    func test_aReadOvertakenByAClear_answersWithWhatIsShownWhenItAnswers() {
        typealias Operation = LinearizabilityCheck.Operation
        func operation(
            _ thread: Int, _ step: LinearizabilityCheck.ConcurrentStep, _ result: String, _ start: Int, _ end: Int
        ) -> Operation {
            var operation = Operation(thread: thread, step: step)
            (operation.start, operation.end, operation.result) = (start, end, result)
            return operation
        }
        let operations = [
            operation(0, .read("a", .networkOnly), "[2]", 1, 11),
            operation(2, .read("b", .networkOnly), "[1, 3]", 2, 17),
            operation(1, .clear, "", 3, 4),
            operation(1, .invalidate("b"), "", 5, 6),
            operation(1, .update("b", .insert(3)), "", 7, 8),
            operation(1, .write("a", [2]), "", 9, 10),
            operation(0, .update("b", .insert(1)), "", 12, 13),
            operation(0, .read("b", .cacheFirst), "[1, 3]", 14, 15),
            operation(0, .read("b", .networkFirst), "[1, 8]", 16, 19),
            operation(2, .read("b", .networkFirst), "[8]", 18, 20),
            operation(2, .read("a", .cacheFirst), "[2]", 21, 22),
            operation(2, .read("b", .networkFirst), "[8]", 23, 24),
        ]
        let final = LinearizabilityCheck.Final(
            levels: [["a": [2], "b": [8]], ["a": [2], "b": [8]]],
            shown: ["a": Shown(value: [2], hasPendingChanges: false), "b": Shown(value: [8], hasPendingChanges: false)])
        switch LinearizabilityCheck.linearization(of: operations, final: final) {
        case .linearizable: break
        case .undecided: XCTFail("the search ran past its budget")
        case .notLinearizable(let reason): XCTFail("\(reason)")
        }
    }

    private func assertLinearizable(
        _ threads: [[LinearizabilityCheck.ConcurrentStep]], rounds: Int = 1_000, slow: Bool = false,
        network: ModelNetwork? = nil, line: UInt = #line
    ) {
        // Heavy: LOADING_TEST_SCALE scales the rounds (the thread sanitizer's stage in CI runs a quarter of them).
        for round in 0..<scaled(rounds, floor: 50) {
            let (operations, final) = LinearizabilityCheck.run(threads, slow: slow, network: network)
            switch LinearizabilityCheck.linearization(of: operations, final: final, network: network) {
            case .linearizable, .undecided: break
            case .notLinearizable(let reason):
                return XCTFail(
                    """
                    round \(round): not linearizable:
                    \(operations.sorted { $0.start < $1.start }.map(\.description).joined(separator: "\n"))
                    left: \(final)
                    \(reason)
                    """, line: line)
            }
        }
    }

    // MARK: Histories that once disagreed (each a defect of the store, fixed)

    /// A level removal that failed left the old value, served again once the key fell out of use.
    func test_aRemovalNoLevelCouldMake_isKept() {
        ModelCheck.assertAgrees([
            .write("b", [0, 2]), .levelsFail(true), .invalidateAll, .remove("b"), .read("b", .cacheFirst),
        ])
        ModelCheck.assertAgrees([.write("b", [0, 2]), .levelsFail(true), .remove("b"), .read("b", .cacheOnly)])
    }

    /// A change of a key the store did not hold loaded its base from the levels as fresh, invalidated or not.
    func test_aChangesBaseReadFromTheLevels_isAsStaleAsTheLevelsValue() {
        ModelCheck.assertAgrees([
            .refresh("b"), .answer("b", request: 0, []), .invalidateAll, .mutate("b", .insert(2)),
            .read("b", .cacheFirst),
        ])
    }

    /// A read overtaken by a removal answered with nothing after the key fell out of use, a value written since.
    func test_aReadOvertakenByARemoval_answersWithWhatTheKeyHasAfterIt() {
        ModelCheck.assertAgrees([.read("a", .cacheFirst), .remove("a"), .write("a", []), .answer("a", request: 0, [1])])
    }

    /// With the clock set back, a value saved before an invalidation was dated after it, and served as fresh.
    func test_aValueSavedBeforeAnInvalidation_isStale_evenWithTheClockSetBack() {
        ModelCheck.assertAgrees([.write("b", []), .advanceClock(seconds: -20), .invalidateAll, .read("b", .cacheFirst)])
    }

    /// A base read judged stale took a mark later than the invalidation: the fetch sent after it left it stale.
    func test_aFetchSentAfterTheInvalidation_makesFreshWhatABaseReadFoundStale() {
        ModelCheck.assertAgrees([
            .write("b", []), .invalidateWhere(["b"]), .refresh("b"), .mutate("b", .delete(2)),
            .answer("b", request: 0, []), .read("b", .cacheFirst),
        ])
    }

    /// A stale value's save recorded its staleness after the fetch sent since, which then could not make it fresh.
    func test_aStaleValuesSave_isStaleSinceItsInvalidation() {
        ModelCheck.assertAgrees([
            .read("a", .networkOnly), .invalidate("a"), .refresh("a"), .answer("a", request: 0, [1]),
            .answer("a", request: 1, [0, 1]), .read("a", .cacheFirst),
        ])
    }

    /// An entry made again for another key kept what its pending changes had shown.
    func test_anEntryMadeAgain_showsItsOwnPendingChanges() {
        ModelCheck.assertAgrees([
            .mutate("b", .insert(1)), .read("a", .networkFirst), .observe("a"), .mutate("a", .delete(3)),
            .answer("a", request: 0, [0]), .settle(mutation: 2, .accept), .stopObserving(observer: 1),
            .mutate("a", .insert(0)), .update("a", .insert(2)), .update("a", .insert(3)), .observe("a"),
        ])
    }

    /// A refetch owed by an invalidation while two fetches from before were in flight was settled, in a first fix of
    /// the store, by the next fetch's request going out, although that fetch then failed: the observers never got
    /// a fresh value. The soak found it (seed 14866, a store that waits for the network) before it landed.
    func test_aRefetchOwedBeforeAFetchThatFails_stillBegins() {
        ModelCheck.assertAgrees(
            [
                .read("a", .cacheFirstYoungerThan(30)), .observe("a"), .answer("a", request: 0, []), .invalidate("a"),
                .refresh("a"), .clear, .connectivity(online: false), .invalidate("a"), .answer("a", request: 1, []),
                .read("a", .networkOnly), .connectivity(online: true), .fail("a", request: 3),
                .answer("a", request: 2, []),
            ], network: .waitsForNetwork)
    }

    // MARK: Defects put back on purpose, each found in the first histories (kept as the shrunk histories)

    func test_aFetchAnswer_neverOverwritesALaterWrite() {
        ModelCheck.assertAgrees([.refresh("b"), .write("b", [0, 1]), .answer("b", request: 0, [])])
    }

    func test_aValueFromBeforeAClear_isNeverShownAfterIt() {
        ModelCheck.assertAgrees([.refresh("a"), .clear, .answer("a", request: 0, [])])
    }

    func test_aRefusedChange_undoesItselfAlone() {
        ModelCheck.assertAgrees([
            .mutate("a", .insert(2)), .mutate("a", .delete(0)), .observe("a"), .settle(mutation: 1, .refuse),
        ])
    }

    func test_anInvalidationStorm_startsOneFetch() {
        ModelCheck.assertAgrees([.read("a", .cacheFirst), .observe("a"), .invalidate("a"), .invalidate("a")])
    }

    func test_aMutationEnqueuedBeforeALogout_isNeverSentAfterIt() {
        ModelCheck.assertQueueAgrees([.online(true), .enqueue(.insert(3)), .enqueue(.insert(2)), .clear])
    }

    /// Found by the model check with a kept value judged without its levels' expiry (put back by hand): seed 49,
    /// 240 steps, shrunk to 3 (the clock set back: a value stamped later than now, which no level serves). The case of
    /// the defect's report second: a value read again once its levels expired it.
    func test_aValueTheStoreHolds_isNoOlderThanItsLevelsServe() {
        ModelCheck.assertAgrees(
            [.write("b", []), .advanceClock(seconds: -20), .read("b", .cacheFirst)], network: .waitsForNetwork,
            levelMaxAge: 60)
        ModelCheck.assertAgrees(
            [.write("b", [1]), .advanceClock(seconds: 40), .advanceClock(seconds: 25), .read("b", .cacheFirst)],
            levelMaxAge: 60)
    }

    /// Found by a soak (seed 2050, shrunk to 5): the model answered a read overtaken by a clear from the value of a
    /// key nothing needed any more, which the store had let go of (its levels, which expired it, answer instead).
    func test_aReadOvertakenByAClear_answersWhatTheLevelsServe_onceNothingNeedsTheKey() {
        ModelCheck.assertAgrees(
            [
                .read("b", .networkOnly), .clear, .write("b", []), .advanceClock(seconds: -20),
                .answer("b", request: 0, []),
            ],
            network: .waitsForNetwork, keepsValues: false, levelMaxAge: 60)
    }

    /// Found by a soak (seed 2519, shrunk to 10): the model answered a network-first read whose fetch failed from the
    /// value of a key nothing needed any more once the fetch ended, which the store had let go of (its levels, which
    /// expired it, answer instead: the read fails).
    func test_aFailedNetworkFirstRead_answersWhatTheLevelsServe_onceNothingNeedsTheKey() {
        ModelCheck.assertAgrees(
            [
                .read("b", .networkOnly), .answer("b", request: 0, []), .observe("b"), .write("b", []),
                .read("b", .networkFirst), .advanceClock(seconds: 10), .advanceClock(seconds: 40),
                .advanceClock(seconds: 10), .stopObserving(observer: 1), .fail("b", request: 1),
            ],
            network: .answersFromCache, keepsValues: false, levelMaxAge: 60)
    }

    /// A logout in one process while the other's save of the key is on its way (held by a slow disk): the save, made
    /// before the logout, lands after the level was emptied, and both processes showed the old user's value. Found by
    /// the sharing model check with logouts added, seed 7, 35 steps shrunk to 4.
    func test_aValueSavedBeforeALogoutInAnotherProcess_isGone_thoughItsSaveLandsAfter() {
        ModelCheck.assertSharingAgrees([.hold(store: 1), .write(store: 1, value: 5), .clear(store: 0), .settle])
        ModelCheck.assertSharingAgrees([.hold(store: 1), .write(store: 1, value: 5), .clear(store: 1), .settle])
        ModelCheck.assertSharingAgrees([
            .hold(store: 1), .write(store: 1, value: 5), .clear(store: 0), .learn(store: 1), .settle,
        ])
        ModelCheck.assertSharingAgrees([
            .hold(store: 1), .write(store: 1, value: 5), .clear(store: 0), .write(store: 0, value: 6), .settle,
        ])
        // The store that logged out learns a removal and a write made before, at once: it removes the write from
        // the level again, and reads the key once, after (seeds 132 and 136659, shrunk to 5).
        ModelCheck.assertSharingAgrees([
            .hold(store: 0), .remove(store: 0), .write(store: 0, value: 1), .clear(store: 1), .settle,
        ])
        ModelCheck.assertSharingAgrees([
            .remove(store: 1), .hold(store: 1), .write(store: 1, value: 13), .clear(store: 0), .settle,
        ])
    }

    /// An update is made when its transform returns: a change the other process made while it ran is older, one
    /// asked of the same store meanwhile waits behind it and is newer.
    func test_anUpdate_isMadeWhenItsTransformReturns_acrossTwoStores() {
        ModelCheck.assertSharingAgrees([.updateWhile(store: 0, value: 2, during: .write(store: 1, value: 1)), .settle])
        ModelCheck.assertSharingAgrees([.updateWhile(store: 0, value: 2, during: .remove(store: 1)), .settle])
        ModelCheck.assertSharingAgrees([.updateWhile(store: 0, value: 2, during: .write(store: 0, value: 1)), .settle])
        ModelCheck.assertSharingAgrees([
            .updateWhile(store: 1, value: 2, during: .learn(store: 0)), .write(store: 0, value: 3), .settle,
        ])
        // A logout: made elsewhere while the update runs, it is older; learned while it runs, it drops the update
        // (seed 120529, 60 steps shrunk to 3); made in the same store, it comes after the update.
        ModelCheck.assertSharingAgrees([.updateWhile(store: 1, value: 2, during: .clear(store: 0)), .settle])
        ModelCheck.assertSharingAgrees([
            .clear(store: 0), .updateWhile(store: 1, value: 18, during: .learn(store: 1)), .settle,
        ])
        ModelCheck.assertSharingAgrees([.updateWhile(store: 1, value: 2, during: .clear(store: 1)), .settle])
        ModelCheck.assertSharingAgrees([
            .write(store: 0, value: 13), .clear(store: 1), .updateWhile(store: 0, value: 16, during: .learn(store: 0)),
            .settle,
        ])
        ModelCheck.assertSharingAgrees([
            .hold(store: 0), .write(store: 1, value: 13), .clear(store: 0), .release(store: 0),
            .updateWhile(store: 1, value: 23, during: .learn(store: 1)), .settle,
        ])
        // A change another process made after a logout whose emptying is issued late (behind a save decided
        // before it): it outlives the logout (seed 130667, shrunk to 4).
        ModelCheck.assertSharingAgrees([
            .updateWhile(store: 1, value: 2, during: .remove(store: 0)), .clear(store: 1), .write(store: 0, value: 10),
            .settle,
        ])
    }

    /// Found by the sharing model check with the processes' order taken out (a store reading the shared level on
    /// every record it learns: landing order decides): seed 3, 47 steps, shrunk to 4 (the first history here, the case
    /// of the defect's report: the earlier write's save lands after the later one's).
    func test_theChangeAskedLast_winsAcrossTwoStores_whicheverSaveLandsLast() {
        ModelCheck.assertSharingAgrees([
            .hold(store: 1), .write(store: 1, value: 19), .write(store: 0, value: 20), .settle,
        ])
        ModelCheck.assertSharingAgrees([
            .hold(store: 0), .write(store: 0, value: 1), .write(store: 1, value: 2), .learn(store: 0), .settle,
        ])
        ModelCheck.assertSharingAgrees([.write(store: 1, value: 19), .write(store: 0, value: 20), .settle])
        ModelCheck.assertSharingAgrees([.hold(store: 1), .write(store: 1, value: 3), .remove(store: 0), .settle])
    }

    /// Found by a soak of the sharing model check (seed 3609, 60 steps, failing about once in 100 runs; cut by hand to
    /// these 5, failing about twice in 3,000): the disk queue's thread issuing store 0's operations on the key (its
    /// read of the removal it learned), store 0's write returned before its save was issued, and took its place in
    /// the processes' order only then, after store 1's removal, asked later. A change now takes its place as the
    /// store makes it. (A race: `LaterWriteWinsTests` pins it with a blocked thread.)
    func test_aWriteWhoseSaveAnotherThreadIssues_isOrderedBeforeAChangeAskedAfterIt() {
        ModelCheck.assertSharingAgrees([
            .remove(store: 1), .learn(store: 0), .write(store: 0, value: 1), .remove(store: 1), .settle,
        ])
    }

    /// Found by the sharing model check once its stores read the key as saves land (seed 7, 35 steps, shrunk to 4,
    /// the first history here): a store reading the shared level after an older change of another process landed
    /// there over its own removal showed that older value for good: its removal, saved again, emptied the level, and
    /// nothing read it again.
    func test_aStoreReadingTheSharedLevel_whileAnOlderChangeLandedThere_endsShowingItsOwnNewerChange() {
        ModelCheck.assertSharingAgrees([.hold(store: 1), .write(store: 1, value: 5), .remove(store: 0), .settle])
        ModelCheck.assertSharingAgrees([
            .write(store: 0, value: 7), .hold(store: 1), .write(store: 1, value: 8), .remove(store: 0),
            .release(store: 1), .read(store: 0), .settle,
        ])
        ModelCheck.assertSharingAgrees([
            .hold(store: 1), .write(store: 1, value: 8), .write(store: 0, value: 9), .release(store: 1),
            .read(store: 0), .settle,
        ])
    }

    /// A list grown upward (a server opening it in the middle): its refresh walks it by next cursors and compares the
    /// pages by the page alone, and a page cap drops from the end a page is not added to. The refresh's comparison by
    /// cursor, put back by hand, was found by the page model check at seed 14, 240 steps shrunk to 13.
    func test_aListGrownUpward_refreshesByThePageAlone_andLoadsMoreAfterIt() {
        ModelCheck.assertPagesAgree(
            [
                .loadPreviousPage("a"), .answer(request: 0), .loadPreviousPage("a"), .answer(request: 0),
                .serverInserts("a", page: 0, 7), .refresh("a"), .answer(request: 0), .answer(request: 0),
                .loadNextPage("a"), .answer(request: 0),
            ], maxPages: 2, bothWays: true)
    }

    /// The double publication of an id swap, put back by hand (the creation's key shown with the server's id before
    /// the store confirmed it): found by the queue model check at seed 1, 90 steps shrunk to 7; these are its core.
    func test_aCreationsServerID_showsInOnePublication() {
        ModelCheck.assertQueueAgrees([.online(true), .enqueue(.insert(-1)), .accept(attempt: 0)])
        ModelCheck.assertQueueAgrees([
            .enqueue(.insert(-1)), .enqueue(.delete(-1)), .enqueue(.insert(2)), .online(true), .accept(attempt: 0),
        ])
    }

    /// Found by the queue model check once it created items (seed 2, 140 steps, shrunk to 59; this is its end): a
    /// mutation naming the item of a creation the server refused, or that gave way to the server's copy, was sent
    /// when it came next, before it was taken out with its creation.
    func test_theMutationsNamingARefusedCreationsItem_areNotSent() {
        ModelCheck.assertQueueAgrees([
            .online(true), .enqueue(.insert(-1)), .enqueue(.delete(-1)), .refuse(attempt: 0),
        ])
        ModelCheck.assertQueueAgrees([
            .online(true), .enqueue(.insert(-1)), .enqueue(.delete(-1)),
            .conflict(attempt: 0, copy: [], answer: .takeServerCopy),
        ])
    }

    /// Found by the queue model check with the server's copy left unconfirmed (put back by hand): seed 1, 90 steps,
    /// shrunk to 16; this is the conflict it ends with, on its own.
    func test_aConflict_showsTheChangeOverTheServersCopy_whicheverTheAnswer() {
        for answer in [ConflictAnswer.rebase, .takeServerCopy, .ask] {
            ModelCheck.assertQueueAgrees([
                .online(true), .enqueue(.insert(1)), .enqueue(.delete(2)),
                .conflict(attempt: 0, copy: [2, 3], answer: answer),
            ])
        }
    }

    /// A creation discarded while a change naming its item is being enqueued (and shown): the change goes with it,
    /// told as discarded, and the enqueue returns. Found at seed 10 on a build whose enqueue then threw that the store
    /// was cleared, 40 steps shrunk to 3.
    func test_aCreationDiscardedWhileAChangeNamingItsItemIsEnqueued_takesItOut_asDiscarded() {
        ModelCheck.assertQueueAgrees([
            .enqueue(.insert(-1)), .enqueue(.insert(-2)), .enqueueWhile(.delete(-2), during: .discard(mutation: 2)),
        ])
    }

    /// A logout while a mutation is being enqueued: the enqueue throws that the store was cleared, and nothing of the
    /// mutation is shown, sent, kept or told as settled.
    func test_aLogoutWhileAMutationIsEnqueued_makesTheEnqueueThrow_leavingNothing() {
        ModelCheck.assertQueueAgrees([.online(true), .enqueue(.insert(1)), .enqueueWhile(.insert(2), during: .clear)])
    }

    /// Found with the app's "ask" left unsaved (put back by hand): seed 1, shrunk to 16 steps.
    func test_aConflictAskedAbout_waitsAcrossARestart_holdingTheQueue_untilResolved() {
        ModelCheck.assertQueueAgrees([
            .online(true), .enqueue(.insert(1)), .conflict(attempt: 0, copy: [2], answer: .ask), .enqueue(.insert(3)),
            .restart, .resolve(mutation: 1, answer: .rebase), .accept(attempt: 1), .accept(attempt: 2),
        ])
    }

    /// A read asked while a change of its key runs, in a store that keeps no value: the key, in use by the read
    /// waiting for its turn, keeps what the change made while the read's fetch runs. Found at seed 507053 on a build
    /// that let go of the key as the read's turn came, 190 steps shrunk to 2.
    func test_aReadWaitingForAChange_holdsItsKey_untilItsFetchHoldsIt() {
        ModelCheck.assertAgrees(
            [.updateWhile("a", .insert(0), during: .read("a", .networkOnly)), .observe("a")],
            network: .answersFromCache, keepsValues: false)
    }

    /// A refresh asked while an update runs, offline, after an invalidation that a fetch in flight owed a refetch
    /// for: the update makes the key fresh, and nothing is refetched when that fetch answers. Found at seed 613349 on a
    /// build that kept the refetch owed when a change made the key fresh, 240 steps shrunk to 13.
    func test_aChangeThatMakesTheKeyFresh_cancelsTheRefetchOwedBeforeIt() {
        ModelCheck.assertAgrees(
            [
                .observe("a"), .invalidate("a"), .refresh("a"), .answer("a", request: 0, []), .refresh("a"),
                .answer("a", request: 2, []), .answer("a", request: 1, []), .revalidate, .connectivity(online: false),
                .invalidate("a"), .updateWhile("a", .insert(2), during: .refresh("a")), .connectivity(online: true),
                .answer("a", request: 3, []),
            ], network: .answersFromCache, keepsValues: false, levelMaxAge: 60)
    }

    /// An invalidation while an observed key's fetch runs owes a refetch; an update asked after it, during which the
    /// key is invalidated again while nobody observes it, confirms stale but settles the refetch owed before it: the
    /// older fetch's answer begins none. Found at seed 65097 on a build that settled an owed refetch only when a
    /// change made the key fresh, 140 steps shrunk to 13.
    func test_aChangeAskedAfterTheInvalidationThatOwedARefetch_settlesIt_thoughALaterOneKeepsTheKeyStale() {
        ModelCheck.assertAgrees(
            [
                .read("a", .cacheThenNetwork), .observe("a"), .answer("a", request: 0, []), .read("a", .networkOnly),
                .invalidate("a"), .answer("a", request: 1, []), .answer("a", request: 2, []), .revalidate,
                .invalidate("a"), .stopObserving(observer: 1),
                .updateWhile("a", .insert(0), during: .invalidate("a")), .observe("a"), .answer("a", request: 3, []),
            ], keepsValues: false)
    }
}
