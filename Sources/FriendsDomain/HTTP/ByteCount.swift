/// A number of bytes in words, for messages: "64 MiB", "1.5 KiB", "300 bytes".
struct ByteCount: CustomStringConvertible {
    let bytes: Int

    init(_ bytes: Int) {
        self.bytes = bytes
    }

    var description: String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        guard bytes >= 1_024 else { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
        var value = Double(bytes) / 1_024
        var unit = 0
        while value >= 1_024, unit < units.count - 1 {
            value /= 1_024
            unit += 1
        }
        let rounded = (value * 10).rounded() / 10
        let number = rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
        return "\(number) \(units[unit])"
    }
}
