import Foundation

/// One event of a server-sent-events stream.
public struct ServerSentEvent: Equatable, Sendable {
    /// The event type (`event:`); "message" when the server named none.
    public var type: String
    /// The data (`data:` lines joined with newlines).
    public var data: String
    /// The last event ID seen so far (`id:`), if any.
    public var id: String?

    /// Creates an event.
    public init(type: String = "message", data: String, id: String? = nil) {
        self.type = type
        self.data = data
        self.id = id
    }
}

/// An incremental parser for `text/event-stream` bodies, as the HTML standard defines them: feed it chunks as they
/// arrive (split anywhere, even inside a line or a UTF-8 sequence) and it returns the events they complete.
///
/// Handles LF, CRLF and CR line endings, multi-line `data:`, comment lines (heartbeats), `id:` and `retry:`.
/// ```swift
/// var parser = ServerSentEventParser()
/// let events = try parser.push(Array("event: upsert\ndata: {...}\n\n".utf8))
/// ```
public struct ServerSentEventParser: Sendable {
    /// An event (its lines, up to the blank line that ends it) was larger than the parser's limit.
    public struct EventTooLarge: Error, Equatable, CustomStringConvertible, LocalizedError {
        /// The limit, in bytes.
        public let limit: Int

        /// Creates the error for a limit of `limit` bytes.
        public init(limit: Int) {
            self.limit = limit
        }

        public var description: String { "A server-sent event was larger than \(ByteCount(limit))." }

        public var errorDescription: String? { description }
    }

    /// The largest event accepted, in bytes.
    public let maximumEventSize: Int
    private var eventSize = 0
    private var line: [UInt8] = []
    private var lastByteWasCR = false
    private var isAtStart = true
    private var eventType = ""
    private var dataLines: [String] = []
    private var hasData = false
    private var lastEventID: String?

    /// The reconnection delay the server asked for (`retry:`), in milliseconds.
    public private(set) var retryMilliseconds: Int?

    /// Creates a parser at the start of a stream, accepting events of up to `maximumEventSize` bytes (1 MiB by
    /// default), so that a hostile or broken server cannot make it buffer without limit.
    public init(maximumEventSize: Int = 1 << 20) {
        self.maximumEventSize = maximumEventSize
    }

    /// Parses the next chunk and returns the events it completed, in order; throws ``EventTooLarge`` as soon as the
    /// event being read passes the limit (the stream should then be dropped).
    public mutating func push<Bytes: Sequence>(_ bytes: Bytes) throws(EventTooLarge) -> [ServerSentEvent]
    where Bytes.Element == UInt8 {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            eventSize += 1
            guard eventSize <= maximumEventSize else { throw EventTooLarge(limit: maximumEventSize) }
            if lastByteWasCR {
                lastByteWasCR = false
                if byte == 0x0A { continue }  // the LF of a CRLF
            }
            switch byte {
            case 0x0A, 0x0D:
                lastByteWasCR = byte == 0x0D
                if let event = processLine() { events.append(event) }
                line.removeAll(keepingCapacity: true)
            default:
                line.append(byte)
            }
        }
        return events
    }

    private mutating func processLine() -> ServerSentEvent? {
        if isAtStart {
            isAtStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }  // a byte-order mark
        }
        guard !line.isEmpty else { return dispatch() }
        guard line.first != 0x3A else { return nil }  // ":" starts a comment, such as a heartbeat
        let field: String
        var value: Substring
        if let colon = line.firstIndex(of: 0x3A) {
            field = String(decoding: line[..<colon], as: UTF8.self)
            let text = String(decoding: line[(colon + 1)...], as: UTF8.self)
            value = text[...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = String(decoding: line, as: UTF8.self)
            value = ""
        }
        switch field {
        case "event":
            eventType = String(value)
        case "data":
            dataLines.append(String(value))
            hasData = true
        case "id":
            if !value.contains("\0") { lastEventID = String(value) }
        case "retry":
            if let milliseconds = Int(value), milliseconds >= 0 { retryMilliseconds = milliseconds }
        default:
            break  // unknown fields are ignored
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        defer {
            eventSize = 0
            eventType = ""
            dataLines = []
            hasData = false
        }
        guard hasData else { return nil }
        return ServerSentEvent(
            type: eventType.isEmpty ? "message" : eventType,
            data: dataLines.joined(separator: "\n"),
            id: lastEventID)
    }
}
