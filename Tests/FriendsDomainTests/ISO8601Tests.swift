import Foundation
import XCTest

@testable import FriendsDomain

final class ISO8601Tests: XCTestCase {
    func test_parsesWhatAFoundationFormatterParses_forRandomDatesAndOffsets() {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let date = Date(
                timeIntervalSince1970: Double.random(in: -2_000_000_000...4_000_000_000, using: &generator).rounded())
            let offset = Int.random(in: -12...14, using: &generator) * 3_600 + [0, 1_800, 2_700].randomElement()!
            plain.timeZone = TimeZone(secondsFromGMT: offset)
            fractional.timeZone = TimeZone(secondsFromGMT: offset)
            for text in [plain.string(from: date), fractional.string(from: date.addingTimeInterval(0.125))] {
                XCTAssertEqual(
                    ISO8601.date(from: text)?.timeIntervalSince1970 ?? .nan,
                    (plain.date(from: text) ?? fractional.date(from: text))?.timeIntervalSince1970 ?? .infinity,
                    accuracy: 0.0005, text)
            }
        }
    }

    func test_roundTripsWithMillisecondPrecision() {
        for seconds in [0, 1_795_168_800.25, -1.5, 951_782_400, 4_102_444_799.999] {
            let date = Date(timeIntervalSince1970: seconds)
            XCTAssertEqual(
                ISO8601.date(from: ISO8601.string(from: date))?.timeIntervalSince1970 ?? .nan, seconds, accuracy: 0.0005
            )
        }
        XCTAssertEqual(ISO8601.string(from: Date(timeIntervalSince1970: 951_782_400)), "2000-02-29T00:00:00.000Z")
    }

    func test_rejectsWhatIsNotAnInternetDateTime() {
        for text in [
            "", "yesterday", "2026-11-20", "2026-11-20T10:00:00", "2026-11-20T10:00Z", "2026-13-20T10:00:00Z",
            "2026-11-20T25:00:00Z", "2026-11-20T10:00:00.Z", "2026-11-20T10:00:00+0100", "2026-11-20T10:00:00Zjunk",
            "２０２６-11-20T10:00:00Z",
        ] {
            XCTAssertNil(ISO8601.date(from: text), text)
        }
    }
}
