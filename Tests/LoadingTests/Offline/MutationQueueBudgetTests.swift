import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// Sending within a budget (a background task): the oldest mutations first, one at a time, nothing started after the
/// deadline or a cancel, the attempt running cancelled when the task is, and a report of every mutation; after it,
/// the queue waits its retry delay before it sends on its own again.
final class MutationQueueBudgetTests: XCTestCase {
    func test_aBudgetThatFitsFiveSends_sendsTheFiveOldest_andTheRestWaitForTheRetryDelay() async throws {
        let (queue, server, scheduler, clock) = try makeBacklog(of: 20)

        let report = await queue.sendPending(within: .seconds(5), clock: clock)

        let first = (0..<5).map { "i\($0)" }
        XCTAssertEqual(server.sent, ["i0"] + first, "the five oldest, each once, after the attempt that failed before")
        XCTAssertEqual(report.settled.map(\.input), first)
        XCTAssertEqual(report.settled.map(\.outcome.description), Array(repeating: "accepted", count: 5))
        XCTAssertNil(report.failure)
        XCTAssertEqual(report.remaining.map(\.input), (5..<20).map { "i\($0)" })
        XCTAssertEqual(queue.pending.map(\.input), report.remaining.map(\.input))

        scheduler.advance(by: .milliseconds(999))
        XCTAssertEqual(server.sent.count, 6, "nothing starts on its own before the retry delay")
        scheduler.advance(by: .milliseconds(1))
        XCTAssertEqual(server.sent.count, 21, "then the queue sends the rest")
        XCTAssertFalse(queue.isMutating)
    }

    func test_aTransientFailure_endsTheSending_andKeepsItsMutationFirst() async throws {
        let (queue, server, _, clock) = try makeBacklog(of: 5)
        server.answer("i1", with: [.failForNow])

        let report = await queue.sendPending(within: .seconds(60), clock: clock)

        XCTAssertEqual(server.sent, ["i0", "i0", "i1"])
        XCTAssertEqual(report.settled.map(\.input), ["i0"])
        XCTAssertTrue(report.failure is TestError)
        XCTAssertEqual(report.remaining.map(\.input), ["i1", "i2", "i3", "i4"])
        XCTAssertEqual(report.remaining.first?.attempts, 1)
        XCTAssertTrue(report.remaining.first?.lastError is TestError)
    }

    func test_aRefusedMutation_isReported_theNextIsSent_andAnEmptiedQueueSendsAtOnceAfterwards() async throws {
        let (queue, server, _, clock) = try makeBacklog(of: 3)
        server.answer("i1", with: [.refuse])

        let report = await queue.sendPending(within: .seconds(60), clock: clock)

        XCTAssertEqual(report.settled.map(\.outcome.description), ["accepted", "refused(Refused())", "accepted"])
        XCTAssertEqual(report.remaining.count, 0)
        try await queue.enqueue("later")
        XCTAssertEqual(server.sent.last, "later", "no wait once every mutation was sent")
    }

    func test_anAttemptRunningAtTheDeadline_endsBeforeTheReport_andNothingStartsAfterIt() async throws {
        let (queue, server, _, clock) = try makeBacklog(of: 3)
        server.answer("i0", with: [.hold])

        let sending = Task { await queue.sendPending(within: .seconds(5), clock: clock) }
        let started = await eventually { server.sent.count == 2 }
        XCTAssertTrue(started)
        clock.advance(by: .seconds(10))
        server.release("i0")
        let report = await sending.value

        XCTAssertEqual(report.settled.map(\.input), ["i0"], "it ran to its end and is reported")
        XCTAssertEqual(report.remaining.map(\.input), ["i1", "i2"])
        XCTAssertEqual(server.sent, ["i0", "i0"], "nothing started after the deadline")
    }

    func test_cancelling_cancelsTheAttemptInFlight_whichIsSentAgainLater() async throws {
        let (queue, server, scheduler, clock) = try makeBacklog(of: 2)
        server.answer("i0", with: [.hold])

        let sending = Task { await queue.sendPending(within: .seconds(60), clock: clock) }
        let started = await eventually { server.sent.count == 2 }
        XCTAssertTrue(started)
        sending.cancel()
        let report = await sending.value

        XCTAssertEqual(server.cancelled, ["i0"], "the system wants its time back: the attempt is cancelled")
        XCTAssertEqual(report.settled.count, 0)
        XCTAssertEqual(report.remaining.map(\.input), ["i0", "i1"])
        XCTAssertEqual(report.remaining.map(\.status), [.waiting, .waiting])
        XCTAssertEqual(server.sent, ["i0", "i0"], "and nothing else starts")

        scheduler.advance(by: .seconds(1))
        XCTAssertEqual(server.sent, ["i0", "i0", "i0", "i1"], "sent again by the queue later, then the next")
        XCTAssertFalse(queue.isMutating)
    }

    func test_offline_sendsNothing_andReportsEveryMutationRemaining() async throws {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        let server = ClockedServer(clock: ManualClock(), takes: .seconds(1))
        let queue = try makeQueue(
            store, server, connectivity: ManualConnectivity(isOnline: false), scheduler: TestScheduler())
        for index in 0..<3 { try await queue.enqueue("i\(index)") }

        let report = await queue.sendPending(within: .seconds(60), clock: ManualClock())

        XCTAssertEqual(server.sent, [])
        XCTAssertEqual(report.remaining.map(\.input), ["i0", "i1", "i2"])
        XCTAssertEqual(report.settled.count, 0)
    }

    // MARK: Helpers

    /// A queue of `count` mutations (`i0`…) waiting: the first attempt of `i0` failed, and the retry's timer is on a
    /// scheduler the test moves. The server takes a second of the clock to answer each attempt.
    private func makeBacklog(
        of count: Int
    ) throws -> (MutationQueue<String, [String], String>, ClockedServer, TestScheduler, ManualClock) {
        let clock = ManualClock()
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write(["a", "b", "c"], for: "list")
        let server = ClockedServer(clock: clock, takes: .seconds(1))
        server.answer("i0", with: [.failForNow])
        let scheduler = TestScheduler()
        let queue = try makeQueue(store, server, connectivity: nil, scheduler: scheduler)
        for index in 0..<count { try queue.enqueue("i\(index)") }
        XCTAssertEqual(server.sent, ["i0"])
        return (queue, server, scheduler, clock)
    }

    private func makeQueue(
        _ store: Store<String, [String]>, _ server: ClockedServer, connectivity: ManualConnectivity?,
        scheduler: TestScheduler
    ) throws -> MutationQueue<String, [String], String> {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("budget-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return try MutationQueue(
            store: store, storage: FileMutationStorage<String>(directory: directory), connectivity: connectivity,
            retryDelays: .constant(.seconds(1)), scheduler: scheduler, key: { _ in "list" },
            change: { item, list in list?.filter { $0 != item } }, send: { item, _ in server.send(item) },
            isRefused: { $0 is Refused })
    }

}

/// A server that takes `takes` of a manual clock to answer each attempt (it moves the clock as it answers), accepting
/// unless told otherwise for an item's next attempts; it records what was sent and what was cancelled.
private final class ClockedServer: Sendable {
    enum Answer {
        case refuse, failForNow, hold
    }

    private let clock: ManualClock
    private let takes: Duration
    private let state = Locked(
        (
            sent: [String](), cancelled: [String](), answers: [String: [Answer]](),
            held: [String: LoadCompletion<Void>]()
        ))

    init(clock: ManualClock, takes: Duration) {
        self.clock = clock
        self.takes = takes
    }

    var sent: [String] { state.withLock { $0.sent } }
    var cancelled: [String] { state.withLock { $0.cancelled } }

    /// How the next attempts of `item` are answered, in order; after them, it is accepted.
    func answer(_ item: String, with answers: [Answer]) {
        state.withLock { $0.answers[item] = answers }
    }

    /// Accepts the held attempt of `item`.
    func release(_ item: String) {
        let completion = state.withLock { $0.held.removeValue(forKey: item) }
        completion?(.success(()))
    }

    func send(_ item: String) -> AnyLoader<Void> {
        AnyLoader { [self] completion in
            let answer = state.withLock { state -> Answer? in
                state.sent.append(item)
                guard var answers = state.answers[item], !answers.isEmpty else { return nil }
                let answer = answers.removeFirst()
                state.answers[item] = answers
                if case .hold = answer { state.held[item] = completion }
                return answer
            }
            if case .hold = answer {
                return AnyCancellationToken { [state] in
                    state.withLock { state in
                        guard state.held.removeValue(forKey: item) != nil else { return }
                        state.cancelled.append(item)
                    }
                }
            }
            clock.advance(by: takes)
            switch answer {
            case .refuse: completion(.failure(Refused()))
            case .failForNow: completion(.failure(TestError()))
            default: completion(.success(()))
            }
            return AnyCancellationToken {}
        }
    }
}
