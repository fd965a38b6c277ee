import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class ServerSentEventsFriendsUpdatesTests: XCTestCase {
    private let baseURL = URL(string: "https://api.example.com")!

    override func setUp() {
        super.setUp()
        URLProtocolStub.reset()
    }

    func test_decodesUpsertAndRemoveEventsSkippingOthersAndMalformedOnes() throws {
        let friend = makeFriend("u1")
        let friendJSON = String(decoding: try Friend.makeEncoder().encode(friend), as: UTF8.self)
        URLProtocolStub.stub(
            .chunks([
                Data(": heartbeat\n\nevent: upsert\ndata: ".utf8),
                Data("\(friendJSON)\n\n".utf8),
                Data("event: upsert\ndata: {\"broken\n\nevent: other\ndata: {}\n\n".utf8),
                Data("event: remove\r\ndata: {\"id\": \"u9\"}\r\n\r\n".utf8),
            ]))
        let scheduler = TestScheduler()
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(), scheduler: scheduler)
        let recorder = StreamRecorder(sut.updates()) { _ in }
        waitUntil { recorder.values.count == 2 }

        XCTAssertEqual(recorder.values, [.upsert(friend), .remove(id: "u9")])
        XCTAssertEqual(URLProtocolStub.requests.first?.url?.absoluteString, "https://api.example.com/friends/events")
        XCTAssertEqual(URLProtocolStub.requests.first?.value(forHTTPHeaderField: "Accept"), "text/event-stream")
        recorder.cancel()
    }

    func test_reconnectsWithBackoffAfterTheServerEndsTheStream() {
        URLProtocolStub.stub(.chunks([Data("data: x\n\n".utf8)]))
        let scheduler = TestScheduler()
        let changes = Locked<[String]>([])
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(),
            reconnection: .constant(.seconds(2), maxAttempts: 10), scheduler: scheduler,
            onConnectionChange: { change in
                switch change {
                case .connected: changes.withLock { $0.append("connected") }
                case .disconnected: changes.withLock { $0.append("disconnected") }
                case .reconnecting(let delay): changes.withLock { $0.append("reconnecting after \(delay)") }
                }
            })
        let recorder = StreamRecorder(sut.updates())

        waitUntil { scheduler.pendingCount == 1 }
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
        scheduler.advance(by: .seconds(2))
        // The second request is recorded before its connection is reported (on the session's delegate queue).
        waitUntil { URLProtocolStub.requests.count == 2 && changes.withLock { $0.count } >= 4 }

        XCTAssertEqual(scheduler.scheduledDelays.first, .seconds(2))
        XCTAssertEqual(
            Array(changes.withLock { $0 }.prefix(4)),
            ["connected", "disconnected", "reconnecting after 2.0 seconds", "connected"])
        recorder.cancel()
    }

    func test_reconnectionWaitsForTheServersRetryHint_clampedToThePolicysMaximumDelay() {
        URLProtocolStub.stub(.chunks([Data("retry: 9223372036854775807\nid: 7\ndata: x\n\n".utf8)]))
        let scheduler = TestScheduler()
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(),
            reconnection: .exponential(initial: .seconds(1), maxDelay: .seconds(30), maxAttempts: 5),
            scheduler: scheduler)
        let recorder = StreamRecorder(sut.updates())

        waitUntil { scheduler.pendingCount == 1 }
        XCTAssertEqual(scheduler.scheduledDelays, [.seconds(30)])
        scheduler.advance(by: .seconds(30))
        waitUntil { URLProtocolStub.requests.count == 2 }
        XCTAssertEqual(URLProtocolStub.requests.last?.value(forHTTPHeaderField: "Last-Event-ID"), "7")
        recorder.cancel()
    }

    func test_anOversizedEvent_dropsTheConnection_withATypedError_andReconnects() {
        let huge = "data: " + String(repeating: "x", count: 2 << 20) + "\n\n"
        URLProtocolStub.stub(.chunks([Data(huge.utf8)]))
        let scheduler = TestScheduler()
        let changes = Locked<[String]>([])
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(),
            reconnection: .constant(.seconds(1), maxAttempts: 2), scheduler: scheduler,
            onConnectionChange: { change in
                if case .disconnected(let error) = change { changes.withLock { $0.append("\(error)") } }
            })
        let recorder = StreamRecorder(sut.updates())

        waitUntil { scheduler.pendingCount == 1 }
        XCTAssertEqual(changes.withLock { $0 }.first, "\(ServerSentEventParser.EventTooLarge(limit: 1 << 20))")
        scheduler.advance(by: .seconds(1))
        waitUntil { recorder.completion != nil }
        guard case .failure(let error)? = recorder.completion else { return XCTFail() }
        XCTAssertTrue(error is ServerSentEventParser.EventTooLarge, "\(error)")
        XCTAssertEqual(recorder.values.count, 0)
    }

    func test_aServerThatAcceptsAndDropsAtOnce_getsAGrowingBackoff_withTheDefaultPolicy() {
        URLProtocolStub.stub(.chunks([]))  // 200, then the stream ends at once
        let scheduler = TestScheduler()
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(), scheduler: scheduler)
        let recorder = StreamRecorder(sut.updates())

        for reconnect in 1...5 {
            waitUntil { scheduler.pendingCount == 1 }
            scheduler.advance(by: scheduler.scheduledDelays.last ?? .zero)
            waitUntil { URLProtocolStub.requests.count == reconnect + 1 }
        }

        XCTAssertEqual(
            Array(scheduler.scheduledDelays.prefix(5)),
            [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8)],
            "connections that never stayed up do not start the count over")
        recorder.cancel()
    }

    func test_failsWhenThePolicyGivesUp_withTheLastError() {
        URLProtocolStub.stub(.response(status: 503, body: Data()))
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(),
            reconnection: .immediate(maxAttempts: 2), scheduler: ImmediateScheduler.immediate)
        let recorder = StreamRecorder(sut.updates())

        waitUntil { recorder.completion != nil }

        XCTAssertEqual(URLProtocolStub.requests.count, 2)
        guard case .failure(let error)? = recorder.completion else { return XCTFail() }
        XCTAssertEqual((error as? ServerSentEventsFriendsUpdates.UnexpectedStatus)?.statusCode, 503)
    }

    func test_cancellingTheSubscriptionClosesTheConnectionAndStopsReconnecting() {
        URLProtocolStub.stub(.hang)
        let scheduler = TestScheduler()
        let sut = ServerSentEventsFriendsUpdates(
            baseURL: baseURL, configuration: URLProtocolStub.makeConfiguration(), scheduler: scheduler)
        let recorder = StreamRecorder(sut.updates())
        waitUntil { URLProtocolStub.requests.count == 1 }

        recorder.cancel()

        waitUntil { URLProtocolStub.stoppedRequests == 1 }
        XCTAssertEqual(scheduler.pendingCount, 0, "no reconnection is scheduled (reconnections go through it)")
        scheduler.run()
        XCTAssertEqual(URLProtocolStub.requests.count, 1)
        XCTAssertEqual(recorder.events.count, 0)
    }

    private func waitUntil(_ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(
            eventually(condition), "the condition did not hold within the watchdog (60 s)", file: file, line: line)
    }
}
