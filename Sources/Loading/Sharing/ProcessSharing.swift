#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How a ``Store`` keeps in step with the other processes over a level they share (an app and its widget or
/// extension over one database or one disk folder in their app group): what one saves, removes or clears there
/// reaches the other's observers.
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedDisk, name: "shared")],
///     fetch: LoaderFamily { (id: String) in api.friend(id) },
///     sharing: try .journal(at: groupFolder.appendingPathComponent("friends.journal"), sharedLevel: "shared"))
/// ```
///
/// Each process's store records every change it makes to the shared level once the level holds it (a write, a
/// fetched value, a confirmed change, a removal, a clear) in a journal file beside the level, and reads the others'
/// records every `polling`:
/// - a key another process saved or removed is read from the shared level and shown, saved to this store's faster
///   levels only (nothing is written back, so nothing echoes), unless this store changed the key since: its own
///   change is newer, and reaches the other process the same way. "Since" is one order every process agrees on,
///   taken when a change is made (a counter in a file beside the journal; an update is made when its transform
///   returned), not when its save lands: the change made last wins. (A shared level that debounces its writes takes
///   the place when its write is issued, at the end of the debounce: give the shared level no debounce where the
///   order of close changes matters.) A process whose change is newer than the one it learns keeps showing its own
///   and saves it again (the older save may have landed after it), so the shared level ends holding the latest
///   change and every process shows it. A process remembers its latest change of at least the last 4,096 keys it
///   saved for this;
/// - a clear (a logout) in another process makes this store forget what it shows and empty its faster levels, as its
///   own clear would, but the shared level is left alone (what another process saved there since stays); this
///   process's mutation queues drop the mutations enqueued before it (nothing of the old user is sent or kept), as
///   its own clear would. A mutation enqueued after the logout was recorded is the next user's and stays: an enqueue
///   reads the journal first, whatever the polling. A logout takes its place in the processes' order when it is
///   made, as a change does: a value saved before it whose save reaches the shared level after it (a slow disk) is
///   the old user's, and a process that knows of both removes it again; a change made after it outlives it (a
///   change this process made after it, whose save had not reached the shared level when the logout was learned,
///   stays shown and is saved).
///
/// A record is appended whole, with a checksum, so a process killed mid-write leaves the old or the new record,
/// never a mix; the journal stays bounded (it starts a new file past about a megabyte). Plain files and `flock`:
/// the same on Linux and Apple platforms.
///
/// The shared level must answer a read with what the saves issued before it left there (``DiskCache`` does: its
/// operations run in order on one queue; so does a database read on the connection that wrote). A level that could
/// answer with an older value may show another process's change over this store's newer one until the next change
/// of the key.
public struct ProcessSharing<Key: Hashable & Sendable>: Sendable {
    let journal: ChangeJournal
    let sharedLevel: String
    let encodeKey: @Sendable (Key) -> Data?
    let decodeKey: @Sendable (Data) -> Key?
    let polling: Duration

    /// Sharing through the journal file at `file` (created when missing; every process names the same one), for the
    /// store's level named `sharedLevel` (a store without a level of that name stops at its creation: a programming
    /// error). `encodeKey` and `decodeKey` turn a key into bytes every process reads the same way and back; a key
    /// either cannot handle is not shared. Throws ``ProcessSharingError`` when the journal cannot be opened.
    public static func journal(
        at file: URL, sharedLevel: String, encodeKey: @escaping @Sendable (Key) -> Data?,
        decodeKey: @escaping @Sendable (Data) -> Key?, polling: Duration = .milliseconds(100)
    ) throws -> ProcessSharing {
        do {
            return ProcessSharing(
                journal: try ChangeJournal(file: file), sharedLevel: sharedLevel, encodeKey: encodeKey,
                decodeKey: decodeKey, polling: polling)
        } catch {
            throw ProcessSharingError(file: file, underlyingError: error)
        }
    }
}

extension ProcessSharing where Key: Codable {
    /// Sharing through the journal file at `file`, keys encoded as JSON (see
    /// ``journal(at:sharedLevel:encodeKey:decodeKey:polling:)``).
    public static func journal(
        at file: URL, sharedLevel: String, polling: Duration = .milliseconds(100)
    ) throws -> ProcessSharing {
        try journal(
            at: file, sharedLevel: sharedLevel,
            encodeKey: { key in JournalKeys.encode(key) },
            decodeKey: { data in (try? JSONDecoder().decode([Key].self, from: data))?.first },
            polling: polling)
    }
}

/// Keys of a store sharing a level, as the journal records them: the JSON of `[key]`, keys sorted, as `JSONEncoder`
/// writes it. Every process must write a key the same way (a process learns which of its changes another one
/// overtook by the bytes), so a string or an integer is written directly only where the bytes are the encoder's: a
/// string with nothing the encoder escapes, any `Int`. The others go through the encoder.
enum JournalKeys {
    static func encode<Key: Encodable>(_ key: Key) -> Data? {
        if let string = key as? String, let bytes = unescaped(string) { return bytes }
        if let number = key as? Int { return integer(number) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try? encoder.encode([key])
    }

    /// `["string"]`, or `nil` when the encoder would escape a character of it (a quote, a backslash, a slash or a
    /// control character).
    private static func unescaped(_ string: String) -> Data? {
        let utf8 = string.utf8
        // Built on the stack: a short key's `Data` keeps its bytes inline, so it costs no allocation.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: utf8.count + 4) { buffer -> Data? in
            buffer[0] = UInt8(ascii: "[")
            buffer[1] = UInt8(ascii: "\"")
            var end = 2
            for byte in utf8 {
                guard byte >= 0x20, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte != UInt8(ascii: "/")
                else { return nil }
                buffer[end] = byte
                end += 1
            }
            buffer[end] = UInt8(ascii: "\"")
            buffer[end + 1] = UInt8(ascii: "]")
            return Data(UnsafeBufferPointer(rebasing: buffer[..<(end + 2)]))
        }
    }

    /// `[number]`.
    private static func integer(_ number: Int) -> Data {
        var bytes: [UInt8] = []
        var rest = number.magnitude
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        bytes.append(UInt8(ascii: "["))
        bytes.reverse()
        bytes.append(UInt8(ascii: "]"))
        return Data(bytes)
    }
}

/// Why a ``ProcessSharing`` journal could not be opened: the file and what the file system said.
public struct ProcessSharingError: Error, CustomStringConvertible {
    /// The journal file.
    public let file: URL
    /// What the file system reported.
    public let underlyingError: any Error

    /// Creates the error.
    init(file: URL, underlyingError: any Error) {
        self.file = file
        self.underlyingError = underlyingError
    }

    public var description: String {
        "The change journal \(file.path) could not be opened, so the store cannot share its changes with other "
            + "processes: \(reason(of: underlyingError))."
    }
}
