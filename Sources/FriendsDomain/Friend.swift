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

/// ISO 8601 timestamps, with or without fractional seconds.
enum ISO8601 {
    static func date(from text: String) -> Date? {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return ISO8601DateFormatter().date(from: text) ?? withFraction.date(from: text)
    }

    static func string(from date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
