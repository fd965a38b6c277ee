import Foundation
import XCTest

@testable import Loading

/// Keys as the journal records them: the same bytes as `JSONEncoder`, however they are written, since every process
/// (of any version) must record a key the same way.
final class JournalKeysTests: XCTestCase {
    func test_stringKeys_areTheEncodersBytes() {
        let strings = [
            "", "all", "friend-42", "with space", "quote\"d", "back\\slash", "a/b", "tab\t", "line\nbreak", "\u{0}",
            "\u{1F}", "\u{7F}", "é", "e\u{301}", "日本語", "👩‍👩‍👧", "\u{2028}\u{2029}", "<>&'", "%20",
            "~!@#$^*()_+={}[]|:;,.?",
        ]
        var generator = SystemRandomNumberGenerator()
        let random = (0..<500).map { _ in
            String(
                (0..<Int.random(in: 0...12, using: &generator)).map { _ in
                    Character(Unicode.Scalar(UInt32.random(in: 0...0x2FFF, using: &generator)) ?? "?")
                })
        }
        for string in strings + random {
            XCTAssertEqual(JournalKeys.encode(string), encoded(string), "the key \(string.debugDescription)")
        }
    }

    func test_integerKeys_areTheEncodersBytes() {
        for number in [0, 1, -1, 9, 10, 42, -100, 1_000_000, Int.max, Int.min]
            + (0..<200).map({ _ in Int.random(in: .min ... .max) })
        {
            XCTAssertEqual(JournalKeys.encode(number), encoded(number), "the key \(number)")
        }
    }

    func test_otherKeys_goThroughTheEncoder() {
        struct Key: Codable, Hashable {
            let list: String
            let page: Int
        }
        XCTAssertEqual(JournalKeys.encode(Key(list: "all", page: 2)), encoded(Key(list: "all", page: 2)))
        XCTAssertEqual(JournalKeys.encode(UInt8(7)), encoded(UInt8(7)))
    }

    private func encoded<Key: Encodable>(_ key: Key) -> Data? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try? encoder.encode([key])
    }
}
