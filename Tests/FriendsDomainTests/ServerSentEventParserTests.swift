import FriendsDomain
import XCTest

final class ServerSentEventParserTests: XCTestCase {
    func test_parsesNamedEventWithData() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            parser.push(bytes("event: upsert\ndata: {\"id\":\"1\"}\n\n")),
            [ServerSentEvent(type: "upsert", data: "{\"id\":\"1\"}")])
    }

    func test_eventSplitAcrossChunksAnywhere_isParsedOnceComplete() {
        let text = "event: upsert\ndata: héllo wörld\n\nevent: remove\ndata: x\n\n"
        let all = Array(text.utf8)
        for split in 1..<all.count {
            var parser = ServerSentEventParser()
            var events = parser.push(all[..<split])
            events += parser.push(all[split...])
            XCTAssertEqual(
                events,
                [ServerSentEvent(type: "upsert", data: "héllo wörld"), ServerSentEvent(type: "remove", data: "x")],
                "split at \(split)")
        }
    }

    func test_multiLineData_isJoinedWithNewlines() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            parser.push(bytes("data: first\ndata: second\ndata\n\n")), [ServerSentEvent(data: "first\nsecond\n")])
    }

    func test_crlfAndCrLineEndings() {
        var crlf = ServerSentEventParser()
        XCTAssertEqual(crlf.push(bytes("event: a\r\ndata: 1\r\n\r\n")), [ServerSentEvent(type: "a", data: "1")])
        var cr = ServerSentEventParser()
        XCTAssertEqual(cr.push(bytes("event: b\rdata: 2\r\r")), [ServerSentEvent(type: "b", data: "2")])
        var splitCRLF = ServerSentEventParser()
        var events = splitCRLF.push(bytes("data: 3\r"))
        events += splitCRLF.push(bytes("\n\r"))
        events += splitCRLF.push(bytes("\n"))
        XCTAssertEqual(events, [ServerSentEvent(data: "3")], "a CRLF split between chunks is one line ending")
    }

    func test_commentsAreHeartbeatsAndProduceNothing() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(parser.push(bytes(": heartbeat\n\n:another\n")), [])
        XCTAssertEqual(parser.push(bytes("data: after\n\n")), [ServerSentEvent(data: "after")])
    }

    func test_eventWithoutDataIsNotDispatched_andTypeResetsAfterEachEvent() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(parser.push(bytes("event: empty\n\ndata: plain\n\n")), [ServerSentEvent(data: "plain")])
    }

    func test_idAndRetryFields() {
        var parser = ServerSentEventParser()
        let events = parser.push(bytes("id: 42\nretry: 1500\ndata: x\n\ndata: y\n\n"))
        XCTAssertEqual(events, [ServerSentEvent(data: "x", id: "42"), ServerSentEvent(data: "y", id: "42")])
        XCTAssertEqual(parser.retryMilliseconds, 1500)
    }

    func test_fieldWithoutSpaceAfterColonAndUnknownFields() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            parser.push(bytes("event:tight\nfoo: bar\ndata:x\n\n")), [ServerSentEvent(type: "tight", data: "x")])
    }

    func test_leadingByteOrderMarkIsIgnored() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(parser.push([0xEF, 0xBB, 0xBF] + bytes("data: bom\n\n")), [ServerSentEvent(data: "bom")])
    }

    func test_incompleteEventAtEndIsNotDispatched() {
        var parser = ServerSentEventParser()
        XCTAssertEqual(parser.push(bytes("data: never finished\n")), [])
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
}
