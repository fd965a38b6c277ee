#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A file of the changes that processes sharing a store's levels made to them, one record per change, for each
/// process to learn what the others changed: the part of sharing a level across processes that works the same on
/// every platform (a poll of the file's size tells a reader that something was appended).
///
/// - Each change carries its place in one order every process over the journal agrees on (``takeOrder()``, a counter
///   in a file beside the journal, taken under a lock when the change is made): records land in the journal when
///   their saves land, in whatever order that is, and the order tells which change was made last.
/// - Each record is appended whole, in one `write`, between line breaks, with a checksum: a record torn by a process
///   killed mid-write is skipped by readers and never hides the next one.
/// - A reader starts at the end of the file (what was changed before is already in the levels) and learns the
///   changes of every other journal over the file, in the order they were appended.
/// - The file stays bounded: once it outgrows its limit, the next writer starts a new one (the old file is kept
///   beside it, as `<name>.previous`, until the next rotation). Appends and the rotation are ordered by a lock file
///   beside the journal, so a reader that sees the rotation has seen every record of the old file. A reader that
///   falls behind by more than a whole file learns ``Change/missed`` instead of the changes it lost.
final class ChangeJournal: Sendable {
    /// A change recorded in the journal.
    enum Change: Equatable, Sendable {
        /// A key's value was saved; the key as the store encodes it.
        case saved(Data)
        /// A key's value was removed.
        case removed(Data)
        /// Every value was removed.
        case cleared
        /// Never appended: a reader's note that it fell behind by more than a whole file and lost changes (anything
        /// may have changed since it last read).
        case missed
    }

    private struct Reader {
        var descriptor: Int32
        var inode: UInt64
        var offset: Int
        /// The bytes read after the last complete record.
        var partial: [UInt8] = []
    }

    /// A change as a reader learns it, with its place in the processes' order (`nil` for a record of a version of
    /// the library that did not number its changes).
    struct Record: Equatable, Sendable {
        let change: Change
        let order: UInt64?
    }

    private struct Writer {
        var descriptor: Int32
        var inode: UInt64
        var sequence: UInt64 = 0
    }

    let file: URL
    /// `file`'s path, made once: every append looks at the file by it.
    private let path: String
    private let maxBytes: Int
    /// Tells this journal's records from the other processes' (and from other journals over the file).
    private let writerID: UInt64
    private let lockDescriptor: Int32
    /// The file of the processes' order: the last number taken, 8 bytes.
    private let orderDescriptor: Int32
    /// The last number this journal took: it never takes a smaller one, should the file go missing.
    private let lastOrder = Locked<UInt64>(0)
    private let reader: Locked<Reader>
    /// Held around the lock file's `flock` too: that orders processes, not the threads of one journal, which share
    /// its descriptor and so its lock (a thread's exclusive lock would not wait for another's shared one).
    private let writer: Locked<Writer>

    /// Opens (or creates) the journal at `file`; its reader starts at the file's end.
    init(file: URL, maxBytes: Int = 1 << 20) throws {
        self.file = file
        path = file.path
        self.maxBytes = max(maxBytes, 4096)
        writerID = UInt64.random(in: 1...UInt64.max)
        var opened: [Int32] = []
        do {
            let lock = try Self.openFile(path + ".lock", O_RDWR | O_CREAT)
            opened.append(lock)
            let order = try Self.openFile(path + ".order", O_RDWR | O_CREAT)
            opened.append(order)
            let (descriptor, inode) = try Self.openForAppending(path)
            opened.append(descriptor)
            let read = try Self.openFile(path, O_RDONLY)
            opened.append(read)
            let status = try Self.status(of: read)
            lockDescriptor = lock
            orderDescriptor = order
            writer = Locked(Writer(descriptor: descriptor, inode: inode))
            reader = Locked(Reader(descriptor: read, inode: UInt64(status.st_ino), offset: Int(status.st_size)))
        } catch {
            for descriptor in opened { close(descriptor) }
            throw error
        }
    }

    deinit {
        close(lockDescriptor)
        close(orderDescriptor)
        _ = writer.withLock { close($0.descriptor) }
        _ = reader.withLock { close($0.descriptor) }
    }

    /// The next place in the order every process over the journal agrees on: larger than any taken before, here or
    /// in another process.
    func takeOrder() throws -> UInt64 {
        // The file lock orders the processes; the lock of `lastOrder` this journal's threads, which share its
        // descriptor (and so its file lock).
        try lastOrder.withLock { last in
            try withFileLock(orderDescriptor, LOCK_EX) {
                var stored: UInt64 = 0
                let read = withUnsafeMutableBytes(of: &stored) { pread(orderDescriptor, $0.baseAddress, 8, 0) }
                guard read >= 0 else { throw POSIXError(errno) }
                let next = max(read == 8 ? UInt64(littleEndian: stored) : 0, last) + 1
                let written = withUnsafeBytes(of: next.littleEndian) { pwrite(orderDescriptor, $0.baseAddress, 8, 0) }
                guard written == 8 else { throw POSIXError(written < 0 ? errno : EIO) }
                last = next
                return next
            }
        }
    }

    /// Appends `change`, whole, for the other processes to read, at a place in the processes' order taken now.
    func append(_ change: Change) throws {
        try append(change, order: try takeOrder())
    }

    /// Appends `change`, whole, for the other processes to read, at `order` (taken when the change was made).
    func append(_ change: Change, order: UInt64) throws {
        precondition(change != .missed, "A journal records changes, not a reader's note")
        try writer.withLock { writer in
            try withFileLock(lockDescriptor, LOCK_SH) {
                // A writer of another process may have started a new file since this one last wrote.
                if let current = try? Self.status(atPath: path), UInt64(current.st_ino) != writer.inode {
                    let (descriptor, inode) = try Self.openForAppending(path)
                    close(writer.descriptor)
                    (writer.descriptor, writer.inode) = (descriptor, inode)
                }
                writer.sequence += 1
                let bytes = Self.record(change, writer: writerID, sequence: writer.sequence, order: order)
                let written = bytes.withUnsafeBytes { write(writer.descriptor, $0.baseAddress, $0.count) }
                guard written == bytes.count else { throw POSIXError(written < 0 ? errno : EIO) }
            }
        }
        try rotateIfNeeded()
    }

    /// The changes the other journals appended since the last call, in the order they were appended.
    func readChanges() -> [Change] {
        readRecords().map(\.change)
    }

    /// The changes the other journals appended since the last call, in the order they were appended, each with its
    /// place in the processes' order.
    func readRecords() -> [Record] {
        reader.withLock { reader in
            var changes = drain(&reader)
            // Rotations: the reader's file is read to its end above, then each file after it from its start.
            while let next = fileAfter(reader.inode) {
                // Every append to the reader's file ended before the rotation that moved past it (rotating waits for
                // them): what landed there since the read above is read before moving on.
                changes += drain(&reader)
                if next.missed { changes.append(Record(change: .missed, order: nil)) }
                close(reader.descriptor)
                reader = Reader(descriptor: next.descriptor, inode: next.inode, offset: 0)
                changes += drain(&reader)
            }
            return changes
        }
    }

    /// The file to read after the reader's (`inode`) once rotations moved the journal past it, opened: the journal's
    /// file when the reader's is the one kept as the previous file (it follows directly); otherwise the previous file
    /// (later than the reader's, or the last one when a writer was killed between renaming it and starting the
    /// next), with what came between them unread (`missed`). `nil` when the reader's file is the journal's, or none
    /// follows it yet.
    private func fileAfter(_ inode: UInt64) -> (descriptor: Int32, inode: UInt64, missed: Bool)? {
        let previousPath = path + ".previous"
        let current = try? Self.status(atPath: path)
        guard current.map({ UInt64($0.st_ino) }) != inode else { return nil }
        let previous = try? Self.status(atPath: previousPath)
        let followsDirectly = previous.map { UInt64($0.st_ino) } == inode
        let next: String
        if followsDirectly {
            guard current != nil else { return nil }
            next = path
        } else {
            guard previous != nil || current != nil else { return nil }
            next = previous != nil ? previousPath : path
        }
        guard let descriptor = try? Self.openFile(next, O_RDONLY) else { return nil }
        let opened = (try? Self.status(of: descriptor)).map { UInt64($0.st_ino) } ?? 0
        guard opened != inode else {
            close(descriptor)
            return nil
        }
        // Checked after opening: a rotation in between leaves the file that followed the reader's as the previous.
        let previousNow = (try? Self.status(atPath: previousPath)).map { UInt64($0.st_ino) }
        return (descriptor, opened, !(followsDirectly && previousNow == inode))
    }

    /// Reads what was appended to the reader's file since its offset, and decodes the complete records.
    private func drain(_ reader: inout Reader) -> [Record] {
        var changes: [Record] = []
        // Most polls find nothing new: the buffer is made only when the file grew.
        guard let size = try? Self.status(of: reader.descriptor).st_size, Int(size) > reader.offset else { return [] }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                pread(reader.descriptor, $0.baseAddress, $0.count, off_t(reader.offset))
            }
            guard count > 0 else { break }
            reader.offset += count
            reader.partial += buffer[..<count]
            guard let end = reader.partial.lastIndex(of: UInt8(ascii: "\n")) else { continue }
            for line in reader.partial[..<end].split(separator: UInt8(ascii: "\n")) {
                if let (writer, record) = Self.decode(line), writer != writerID { changes.append(record) }
            }
            reader.partial.removeSubrange(...end)
        }
        return changes
    }

    /// Starts a new file once this one outgrew the limit.
    private func rotateIfNeeded() throws {
        let size = writer.withLock { (try? Self.status(of: $0.descriptor)).map { Int($0.st_size) } ?? 0 }
        guard size > maxBytes else { return }
        try writer.withLock { writer in
            try withFileLock(lockDescriptor, LOCK_EX) {
                // Another writer may have rotated it meanwhile.
                guard let current = try? Self.status(atPath: path), Int(current.st_size) > maxBytes else {
                    return
                }
                guard rename(path, path + ".previous") == 0 else { throw POSIXError(errno) }
                // The new file is made at once, so that the journal's file always exists and readers move on to it.
                let (descriptor, inode) = try Self.openForAppending(path)
                close(writer.descriptor)
                (writer.descriptor, writer.inode) = (descriptor, inode)
            }
        }
    }

    private func withFileLock<R>(_ descriptor: Int32, _ operation: Int32, _ body: () throws -> R) throws -> R {
        while flock(descriptor, operation) != 0 {
            guard errno == EINTR else { throw POSIXError(errno) }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    // MARK: Records

    /// `C2 <writer> <sequence> <order> <kind> <key> <checksum>` between line breaks: the writer's own count, the
    /// change's place in the processes' order, the kind `s` (saved), `r` (removed) or `c` (cleared, `-` for the key),
    /// the key in base 64, the checksum an FNV-1a hash of what precedes it. (Records of version 1 had no order.)
    static func record(_ change: Change, writer: UInt64, sequence: UInt64, order: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        bytes.append(UInt8(ascii: "\n"))
        bytes.append(contentsOf: "C2 ".utf8)
        appendDigits(of: writer, radix: 16, to: &bytes)
        bytes.append(UInt8(ascii: " "))
        appendDigits(of: sequence, radix: 10, to: &bytes)
        bytes.append(UInt8(ascii: " "))
        appendDigits(of: order, radix: 10, to: &bytes)
        switch change {
        case .saved(let key):
            bytes.append(contentsOf: " s ".utf8)
            appendBase64(of: key, to: &bytes)
        case .removed(let key):
            bytes.append(contentsOf: " r ".utf8)
            appendBase64(of: key, to: &bytes)
        case .cleared:
            bytes.append(contentsOf: " c -".utf8)
        case .missed:
            preconditionFailure("A journal records changes, not a reader's note")
        }
        let checksum = checksum(of: bytes[1...])
        bytes.append(UInt8(ascii: " "))
        appendDigits(of: checksum, radix: 16, to: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Appends `number`'s digits in base 16 (lowercase) or 10, as `String(number, radix:)` writes them.
    private static func appendDigits(of number: UInt64, radix: UInt64, to bytes: inout [UInt8]) {
        let hexadecimal = radix == 16
        let start = bytes.count
        var rest = number
        repeat {
            let digit = UInt8(truncatingIfNeeded: hexadecimal ? rest & 0xf : rest % 10)
            bytes.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
            rest = hexadecimal ? rest >> 4 : rest / 10
        } while rest > 0
        // Written from the last digit: turned around in place.
        var (low, high) = (start, bytes.count - 1)
        while low < high {
            bytes.swapAt(low, high)
            (low, high) = (low + 1, high - 1)
        }
    }

    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Appends `data` in standard base 64, padded, as `Data.base64EncodedString()` writes it.
    private static func appendBase64(of data: Data, to bytes: inout [UInt8]) {
        data.withUnsafeBytes { (input: UnsafeRawBufferPointer) in
            var index = 0
            while index < input.count {
                let count = min(3, input.count - index)
                var group = UInt32(input[index]) << 16
                if count > 1 { group |= UInt32(input[index + 1]) << 8 }
                if count > 2 { group |= UInt32(input[index + 2]) }
                for position in 0..<4 {
                    guard position <= count else {
                        bytes.append(UInt8(ascii: "="))
                        continue
                    }
                    bytes.append(base64Alphabet[Int((group >> UInt32(18 - 6 * position)) & 0x3f)])
                }
                index += count
            }
        }
    }

    /// The writer and record of one line; `nil` for a line that is not a whole record.
    static func decode(_ line: ArraySlice<UInt8>) -> (UInt64, Record)? {
        guard let last = line.lastIndex(of: UInt8(ascii: " ")),
            let stored = UInt64(String(decoding: line[(last + 1)...], as: UTF8.self), radix: 16),
            stored == checksum(of: line[..<last])
        else { return nil }
        var fields = String(decoding: line[..<last], as: UTF8.self).split(separator: " ")
        var order: UInt64?
        switch (fields.first, fields.count) {
        case ("C1", 5): break
        case ("C2", 6):
            guard let number = UInt64(fields.remove(at: 3)) else { return nil }
            order = number
        default: return nil
        }
        guard let writer = UInt64(fields[1], radix: 16) else { return nil }
        let change: Change
        switch (fields[3], Data(base64Encoded: String(fields[4]))) {
        case ("s", .some(let key)): change = .saved(key)
        case ("r", .some(let key)): change = .removed(key)
        case ("c", _): change = .cleared
        default: return nil
        }
        return (writer, Record(change: change, order: order))
    }

    private static func checksum(of bytes: some Collection<UInt8>) -> UInt64 {
        bytes.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3 }
    }

    // MARK: Files

    private static func openFile(_ path: String, _ flags: Int32) throws -> Int32 {
        let descriptor = open(path, flags | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(errno) }
        return descriptor
    }

    private static func openForAppending(_ path: String) throws -> (Int32, UInt64) {
        let descriptor = try openFile(path, O_WRONLY | O_APPEND | O_CREAT)
        return (descriptor, UInt64(try status(of: descriptor).st_ino))
    }

    private static func status(of descriptor: Int32) throws -> stat {
        var result = stat()
        guard fstat(descriptor, &result) == 0 else { throw POSIXError(errno) }
        return result
    }

    private static func status(atPath path: String) throws -> stat {
        var result = stat()
        guard stat(path, &result) == 0 else { throw POSIXError(errno) }
        return result
    }
}
