import FriendsDomain
import XCTest

final class ServerSentEventParserTests: XCTestCase {
    func test_parsesNamedEventWithData() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            try parser.push(bytes("event: upsert\ndata: {\"id\":\"1\"}\n\n")),
            [ServerSentEvent(type: "upsert", data: "{\"id\":\"1\"}")])
    }

    func test_eventSplitAcrossChunksAnywhere_isParsedOnceComplete() throws {
        let text = "event: upsert\ndata: héllo wörld\n\nevent: remove\ndata: x\n\n"
        let all = Array(text.utf8)
        for split in 1..<all.count {
            var parser = ServerSentEventParser()
            var events = try parser.push(all[..<split])
            events += try parser.push(all[split...])
            XCTAssertEqual(
                events,
                [ServerSentEvent(type: "upsert", data: "héllo wörld"), ServerSentEvent(type: "remove", data: "x")],
                "split at \(split)")
        }
    }

    func test_multiLineData_isJoinedWithNewlines() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            try parser.push(bytes("data: first\ndata: second\ndata\n\n")), [ServerSentEvent(data: "first\nsecond\n")])
    }

    func test_crlfAndCrLineEndings() throws {
        var crlf = ServerSentEventParser()
        XCTAssertEqual(try crlf.push(bytes("event: a\r\ndata: 1\r\n\r\n")), [ServerSentEvent(type: "a", data: "1")])
        var cr = ServerSentEventParser()
        XCTAssertEqual(try cr.push(bytes("event: b\rdata: 2\r\r")), [ServerSentEvent(type: "b", data: "2")])
        var splitCRLF = ServerSentEventParser()
        var events = try splitCRLF.push(bytes("data: 3\r"))
        events += try splitCRLF.push(bytes("\n\r"))
        events += try splitCRLF.push(bytes("\n"))
        XCTAssertEqual(events, [ServerSentEvent(data: "3")], "a CRLF split between chunks is one line ending")
    }

    func test_commentsAreHeartbeatsAndProduceNothing() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.push(bytes(": heartbeat\n\n:another\n")), [])
        XCTAssertEqual(try parser.push(bytes("data: after\n\n")), [ServerSentEvent(data: "after")])
    }

    func test_eventWithoutDataIsNotDispatched_andTypeResetsAfterEachEvent() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.push(bytes("event: empty\n\ndata: plain\n\n")), [ServerSentEvent(data: "plain")])
    }

    func test_idAndRetryFields() throws {
        var parser = ServerSentEventParser()
        let events = try parser.push(bytes("id: 42\nretry: 1500\ndata: x\n\ndata: y\n\n"))
        XCTAssertEqual(events, [ServerSentEvent(data: "x", id: "42"), ServerSentEvent(data: "y", id: "42")])
        XCTAssertEqual(parser.retryMilliseconds, 1500)
    }

    func test_fieldWithoutSpaceAfterColonAndUnknownFields() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(
            try parser.push(bytes("event:tight\nfoo: bar\ndata:x\n\n")), [ServerSentEvent(type: "tight", data: "x")])
    }

    func test_leadingByteOrderMarkIsIgnored() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.push([0xEF, 0xBB, 0xBF] + bytes("data: bom\n\n")), [ServerSentEvent(data: "bom")])
    }

    func test_incompleteEventAtEndIsNotDispatched() throws {
        var parser = ServerSentEventParser()
        XCTAssertEqual(try parser.push(bytes("data: never finished\n")), [])
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func test_anEventLargerThanTheLimit_throws_andSmallerOnesPass() throws {
        var parser = ServerSentEventParser(maximumEventSize: 64)
        XCTAssertEqual(try parser.push(bytes("data: \(String(repeating: "x", count: 40))\n\n")).count, 1)
        XCTAssertEqual(
            try parser.push(bytes("data: \(String(repeating: "y", count: 40))\n\n")).count, 1,
            "the size counts per event")
        XCTAssertThrowsError(try parser.push(bytes("data: \(String(repeating: "z", count: 100))"))) { error in
            XCTAssertEqual(error as? ServerSentEventParser.EventTooLarge, .init(limit: 64))
        }
    }
}
