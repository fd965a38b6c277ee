import Foundation

/// A friend, as the API sends it and the stores keep it.
public struct Friend: Codable, Hashable, Sendable, Identifiable {
    /// The friend's stable identifier.
    public var id: String
    /// The display name.
    public var name: String
    /// Presence: online, away, offline, or whatever the server adds later.
    public var status: Status
    /// Where the avatar image is, if the friend has one.
    public var avatarURL: URL?
    /// When the server last changed this friend.
    public var updatedAt: Date

    /// Creates a friend.
    public init(id: String, name: String, status: Status, avatarURL: URL? = nil, updatedAt: Date) {
        self.id = id
        self.name = name
        self.status = status
        self.avatarURL = avatarURL
        self.updatedAt = updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case id, name, status
        case avatarURL = "avatar_url"
        case updatedAt = "updated_at"
    }

    /// A friend's presence. Open-ended: a status this version does not know is kept as it came.
    public struct Status: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral {
        /// The status as the API spells it.
        public var rawValue: String

        /// Creates a status from the API's spelling.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// Creates a status from a string literal.
        public init(stringLiteral value: String) {
            rawValue = value
        }

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        /// Connected now.
        public static let online: Status = "online"
        /// Connected but idle.
        public static let away: Status = "away"
        /// Not connected.
        public static let offline: Status = "offline"
    }
}

extension Friend {
    /// The JSON decoding the friends API uses: snake_case keys (declared above) and ISO 8601 dates.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = ISO8601.date(from: text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "Not an ISO 8601 date: \(text)"))
            }
            return date
        }
        return decoder
    }

    /// The encoder matching ``makeDecoder()``, for servers and tests.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.string(from: date))
        }
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension Array where Element == Friend {
    /// The list with one friend per id: where an id appears more than once, the last occurrence's values win, at
    /// the first occurrence's position. The API's lists and every store go through it, so memory and disk agree.
    public func deduplicatedByID() -> [Friend] {
        var lastIndex: [Friend.ID: Int] = [:]
        for (index, friend) in enumerated() { lastIndex[friend.id] = index }
        guard lastIndex.count < count else { return self }
        var emitted = Set<Friend.ID>()
        return compactMap { friend in
            guard emitted.insert(friend.id).inserted, let last = lastIndex[friend.id] else { return nil }
            return self[last]
        }
    }
}

/// ISO 8601 timestamps (`2026-11-20T10:00:00Z`, `2026-11-20T10:00:00.250+01:00`), with or without fractional
/// seconds, parsed and written by hand: a formatter per date cost a third of a millisecond, so that large lists
/// could not be decoded in time.
enum ISO8601 {
    /// The date of `text`, or `nil` when it is not an internet date-time (`YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`).
    static func date(from text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            var index = 0
            func number(_ digits: Int) -> Int? {
                guard index + digits <= bytes.count else { return nil }
                var value = 0
                for offset in 0..<digits {
                    let byte = bytes[index + offset]
                    guard byte >= 48, byte <= 57 else { return nil }
                    value = value * 10 + Int(byte - 48)
                }
                index += digits
                return value
            }
            func expect(_ characters: [UInt8]) -> Bool {
                guard index < bytes.count, characters.contains(bytes[index]) else { return false }
                index += 1
                return true
            }
            guard let year = number(4), expect([45]), let month = number(2), expect([45]), let day = number(2),
                expect([84, 116]), let hour = number(2), expect([58]), let minute = number(2), expect([58]),
                let second = number(2),
                (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
            else { return nil }
            var fraction = 0.0
            if index < bytes.count, bytes[index] == 46 {  // "."
                index += 1
                var scale = 0.1
                let start = index
                while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                    fraction += Double(bytes[index] - 48) * scale
                    scale /= 10
                    index += 1
                }
                guard index > start else { return nil }
            }
            var offset = 0
            if expect([90, 122]) {  // "Z"
                offset = 0
            } else if index < bytes.count, bytes[index] == 43 || bytes[index] == 45 {  // "+" or "-"
                let sign = bytes[index] == 45 ? -1 : 1
                index += 1
                guard let hours = number(2), expect([58]), let minutes = number(2), hours < 24, minutes < 60 else {
                    return nil
                }
                offset = sign * (hours * 3_600 + minutes * 60)
            } else {
                return nil
            }
            guard index == bytes.count else { return nil }
            let days = daysFromCivil(year: year, month: month, day: day)
            let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
            return Date(timeIntervalSince1970: Double(seconds) + fraction)
        }
    }

    /// `date` as `YYYY-MM-DDTHH:MM:SS.fffZ`, in UTC, with milliseconds.
    static func string(from date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 * 1_000).rounded(.down))
        let (days, remainder) = milliseconds.floorDivided(by: 86_400_000)
        let (year, month, day) = civilFromDays(days)
        let hour = remainder / 3_600_000
        let minute = remainder / 60_000 % 60
        let second = remainder / 1_000 % 60
        let millisecond = remainder % 1_000
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(width - digits.count, 0)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
            + ".\(pad(millisecond, 3))Z"
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01.
    private static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int {
    /// The quotient rounded down and a remainder that is never negative.
    fileprivate func floorDivided(by divisor: Int) -> (quotient: Int, remainder: Int) {
        let remainder = ((self % divisor) + divisor) % divisor
        return ((self - remainder) / divisor, remainder)
    }
}
