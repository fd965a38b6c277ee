#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension UUID {
    /// The text ``uuidString`` gives (upper-case hexadecimal digits in groups of 8, 4, 4, 4 and 12), written here:
    /// Foundation on Linux formats each byte through `snprintf`, a tenth of a queued mutation's cost.
    var text: String {
        let bytes = uuid
        return withUnsafeBytes(of: bytes) { bytes in
            String(unsafeUninitializedCapacity: 36) { characters in
                let digits: StaticString = "0123456789ABCDEF"
                var written = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        characters[written] = UInt8(ascii: "-")
                        written += 1
                    }
                    characters[written] = digits.utf8Start[Int(byte >> 4)]
                    characters[written + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    written += 2
                }
                return written
            }
        }
    }
}
