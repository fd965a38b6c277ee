import Foundation
import XCTest

@testable import Loading

/// A queued mutation's id is a UUID's text, written by the library: it must read exactly as Foundation writes it.
final class MutationIDTests: XCTestCase {
    func test_aUUIDsText_isWhatFoundationWrites_forEveryByteValue() {
        var generator = SeededRandom(seed: 7)
        var samples = [UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))]
        samples.append(
            UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))
        for first in stride(from: 0, to: 256, by: 16) {
            // Each byte value appears in each position across these.
            var bytes = (0..<16).map { UInt8((first + $0 * 17) % 256) }
            bytes.shuffle(using: &generator)
            samples.append(
                UUID(
                    uuid: (
                        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                        bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                    )))
        }
        for _ in 0..<100 { samples.append(UUID()) }
        for uuid in samples { XCTAssertEqual(uuid.text, uuid.uuidString) }
    }
}
