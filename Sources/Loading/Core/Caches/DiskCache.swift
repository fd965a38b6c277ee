import Dispatch

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

/// A cache of `Codable` values in one directory, a file per key, written atomically, with an expiry judged against
/// an injected clock.
///
/// ```swift
/// let disk = DiskCache<String, Friend>(directory: caches.appending(path: "friends"), expiry: .maxAge(.seconds(604_800)))
/// let friend = disk["u1"].fallback(to: api.friend("u1").caching(to: disk["u1"]))
/// ```
/// Reads and writes run one at a time on the cache's own serial queue and complete there, so a read started after
/// a save sees it. An entry that cannot be read or decoded (a truncated file, another format) is a miss
/// (``CacheMiss/absent``), and is deleted; it never crashes. A failed write leaves the previous entry intact.
///
/// Each entry holds its key, so two keys whose file names collide never read each other's value. A save writes a
/// temporary file beside the entry and renames it into place, so a process killed mid-write leaves the previous
/// entry whole. The temporary files such a process leaves are deleted when a cache opens the directory (and by
/// ``removeAll(completion:)``), never one that a live process is still writing. Failed writes and removals are
/// reported as ``DiskCacheError``s.
///
/// With a size limit, the cache deletes the least recently used entries (the least recently read or saved) once
/// their files exceed it, after each save; when each entry was last used is kept in its file's modification time,
/// so the order survives a relaunch and a process killed at any point, and a clock set back does not make a recent
/// use look old:
/// ```swift
/// let images = DiskCache<URL, Data>(directory: caches.appending(path: "images"), sizeLimit: 50_000_000)
/// ```
/// The limit counts the entries this cache saved or read and those it found when it first needed to; entries another
/// process saves meanwhile count once this cache reads them. A temporary file of an unfinished save that could not
/// be deleted yet (another process was saving) counts too, until a later save deletes it.
public final class DiskCache<Key: Hashable & Sendable & Codable, Value: Sendable & Codable>: KeyedCache {
    /// The directory the entries are kept in.
    let directory: URL
    /// How long a value stays fresh.
    public let expiry: CacheExpiry<Value>
    private let now: @Sendable () -> Date
    private let queue: DispatchQueue
    private let sizeLimit: Int?
    /// The entries' sizes and order of use, with a size limit: listed from the directory when first needed, then
    /// kept up to date. Only the cache's queue reads or changes it.
    private let usage = Locked<DiskUsage?>(nil)

    /// Creates a cache keeping its entries in `directory` (created when missing).
    /// - Parameters:
    ///   - directory: a directory of the cache's own; ``removeAll(completion:)`` empties it of entries (a `.lock`
    ///     file that saves share stays).
    ///   - expiry: how long a value stays fresh.
    ///   - sizeLimit: the most bytes the entries' files take; the least recently used go first. A value larger than
    ///     the limit on its own is not kept (the key's older value is removed). `nil` (the default): no limit.
    ///   - now: the clock saves are stamped with and expiry is judged against (and uses are ordered by).
    public init(
        directory: URL,
        expiry: CacheExpiry<Value> = .never,
        sizeLimit: Int? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.directory = directory
        self.expiry = expiry
        self.sizeLimit = sizeLimit.map { max(0, $0) }
        self.now = now
        queue = DispatchQueue(label: "Loading.DiskCache")
        queue.async { [self] in _ = removeAbandonedWrites() }
    }

    public func value(for key: Key, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void) {
        queue.async { [self] in completion(read(key)) }
    }

    public func save(_ value: Value, for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [self] in completion(write(value, for: key, savedAt: now())) }
    }

    /// Saves `value` for `key` as saved at `savedAt` (its age and expiry count from then).
    public func save(
        _ value: Value, for key: Key, savedAt: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        queue.async { [self] in completion(write(value, for: key, savedAt: savedAt)) }
    }

    /// Writes the file of `key` (on the cache's queue).
    private func write(_ value: Value, for key: Key, savedAt: Date) -> Result<Void, any Error> {
        attempt(.save, key: key) { file in
            let data = try JSONEncoder().encode(Entry(key: key, savedAt: savedAt, value: value))
            if let sizeLimit, data.count > sizeLimit {
                // Not kept; and a read must not find the value this save replaces.
                try removeFile(at: file)
                return
            }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try replace(file, with: data)
            noteUse(of: file, size: data.count)
        }
    }

    public func removeValue(for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [self] in
            completion(attempt(.remove, key: key) { file in try removeFile(at: file) })
        }
    }

    public func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        queue.async { [self] in
            completion(
                attempt(.removeAll, key: nil) { _ in
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
                    for name in names where name.hasSuffix(Self.fileExtension) {
                        try removeFile(at: directory.appendingPathComponent(name))
                    }
                    let unfinished = removeAbandonedWrites()
                    if sizeLimit != nil { usage.withLock { $0 = DiskUsage(found: [], unfinishedSize: unfinished) } }
                })
        }
    }

    // MARK: Files

    private struct Entry: Codable {
        let key: Key
        let savedAt: Date
        let value: Value
    }

    private static var fileExtension: String { ".entry" }
    private static var temporaryExtension: String { ".writing" }

    /// Whether `name` is the temporary file of a save (this cache's, or the one Foundation's atomic write made in
    /// earlier versions).
    private static func isTemporaryFile(_ name: String) -> Bool {
        name.hasSuffix(temporaryExtension) || name.hasPrefix(".dat.nosync")
    }

    /// The lock every save holds shared while its temporary file exists, in any process; whoever deletes the
    /// temporary files of dead processes holds it alone.
    private var savesLock: URL { directory.appendingPathComponent(".lock") }

    /// Deletes the temporary files of saves that never finished (their process was killed), when no process is
    /// saving; returns the bytes of those left (a save was under way, so which are abandoned is not known).
    private func removeAbandonedWrites() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        let temporary = names.filter(Self.isTemporaryFile).map { directory.appendingPathComponent($0) }
        guard !temporary.isEmpty else { return 0 }
        guard let lock = try? FolderLock(savesLock, exclusive: true, waits: false) else {
            return temporary.reduce(0) { total, file in
                let attributes = try? FileManager.default.attributesOfItem(atPath: file.path)
                return total + (Self.byteCount(attributes?[.size]) ?? 0)
            }
        }
        defer { lock.release() }
        for file in temporary { unlink(file.path) }
        return 0
    }

    /// Runs `body` on the file of `key` (the directory for `removeAll`), reporting a failure as a ``DiskCacheError``.
    private func attempt(
        _ operation: DiskCacheError<Key>.Operation, key: Key?, _ body: (URL) throws -> Void
    ) -> Result<Void, any Error> {
        var file = directory
        do {
            if let key { file = try fileURL(for: key) }
            try body(file)
            return .success(())
        } catch {
            return .failure(DiskCacheError(operation: operation, key: key, file: file, underlyingError: error))
        }
    }

    /// Writes `data` to a temporary file beside `file` and renames it into place: readers see the old entry or the
    /// new one, never a part. Whatever is not a file at `file` (a directory, say) is removed first.
    private func replace(_ file: URL, with data: Data) throws {
        let type = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.type] as? FileAttributeType
        if let type, type != .typeRegular { try FileManager.default.removeItem(at: file) }
        let lock = try FolderLock(savesLock, exclusive: false, waits: true)
        defer { lock?.release() }
        let temporary = file.appendingPathExtension(UUID().uuidString + Self.temporaryExtension)
        try data.write(to: temporary)
        guard rename(temporary.path, file.path) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(at: temporary)
            throw POSIXError(POSIXError.Code(rawValue: code) ?? .EIO)
        }
    }

    private func read(_ key: Key) -> Result<CachedValue<Value>, any Error> {
        let url: URL
        do { url = try fileURL(for: key) } catch { return .failure(error) }
        guard let data = try? Data(contentsOf: url) else {
            forget(url)
            return .failure(CacheMiss.absent)
        }
        guard let entry = try? JSONDecoder().decode(Entry.self, from: data) else {
            try? removeFile(at: url)  // unreadable: a miss, and gone
            return .failure(CacheMiss.absent)
        }
        guard entry.key == key else { return .failure(CacheMiss.absent) }  // another key's file name collided
        guard expiry.isFresh(entry.value, savedAt: entry.savedAt, now: now()) else {
            try? removeFile(at: url)
            return .failure(CacheMiss.expired(savedAt: entry.savedAt))
        }
        noteUse(of: url, size: data.count)
        return .success(CachedValue(entry.value, savedAt: entry.savedAt))
    }

    private func removeFile(at url: URL) throws {
        forget(url)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    // MARK: Size limit

    /// Records a use of the entry at `file` (saved or read now) of `size` bytes, with a size limit: stamps the
    /// file's modification time with the use, then deletes the least recently used entries while the entries
    /// exceed the limit.
    private func noteUse(of file: URL, size: Int) {
        guard let sizeLimit else { return }
        let (unknown, unfinished) = usage.withLock { ($0 == nil, $0?.unfinishedSize ?? 0) }
        let found = unknown ? listEntries() : nil
        // Counted until deleted: once listed, then at each use until none is left.
        let stillUnfinished = unknown || unfinished > 0 ? removeAbandonedWrites() : 0
        let now = Self.microseconds(since: self.now())
        let (stamp, evicted) = usage.withLock { stored -> (Int64, [String]) in
            // Taken out while it changes, so that the change does not copy it.
            var usage = exchange(&stored, with: nil) ?? DiskUsage(found: found ?? [])
            defer { stored = usage }
            usage.unfinishedSize = stillUnfinished
            let stamp = usage.nextStamp(now: now)
            usage.use(file.lastPathComponent, size: size, stamp: stamp)
            var evicted: [String] = []
            while usage.totalSize > sizeLimit, let oldest = usage.takeOldest() { evicted.append(oldest) }
            return (stamp, evicted)
        }
        let date = Date(timeIntervalSinceReferenceDate: Double(stamp) / 1_000_000)
        try? FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: file.path)
        for name in evicted { try? FileManager.default.removeItem(at: directory.appendingPathComponent(name)) }
    }

    /// Forgets the entry at `file` (removed, or found missing), with a size limit.
    private func forget(_ file: URL) {
        guard sizeLimit != nil else { return }
        usage.withLock { $0?.remove(file.lastPathComponent) }
    }

    /// The entries in the directory, with their sizes and when they were last used.
    private func listEntries() -> [(name: String, size: Int, stamp: Int64)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { name in
            guard name.hasSuffix(Self.fileExtension),
                let attributes = try? FileManager.default.attributesOfItem(
                    atPath: directory.appendingPathComponent(name).path),
                attributes[.type] as? FileAttributeType == .typeRegular,
                let size = Self.byteCount(attributes[.size]),
                let modified = attributes[.modificationDate] as? Date
            else { return nil }
            return (name, size, Self.microseconds(since: modified))
        }
    }

    /// Whole microseconds since the reference date: the unit of use stamps (file systems keep at least these).
    private static func microseconds(since date: Date) -> Int64 {
        Int64((date.timeIntervalSinceReferenceDate * 1_000_000).rounded())
    }

    /// A file's size as the file manager gives it (an unsigned integer, or a number on Apple platforms).
    private static func byteCount(_ attribute: Any?) -> Int? {
        if let size = attribute as? UInt { return Int(size) }
        if let size = attribute as? Int { return size }
        if let size = attribute as? UInt64 { return Int(size) }
        return nil
    }

    /// The file of `key`: a 64-bit FNV-1a hash of the key's JSON encoding (stable across launches, unlike
    /// `hashValue`), in hexadecimal.
    private func fileURL(for key: Key) throws -> URL {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in try encoder.encode([key]) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let name = String(hash, radix: 16)
        return directory.appendingPathComponent(
            String(repeating: "0", count: 16 - name.count) + name + Self.fileExtension)
    }
}

/// Why a ``DiskCache`` could not save or remove: the operation, the key (none for ``DiskCache/removeAll(completion:)``),
/// the file, and the underlying error. The previous entry is left intact.
public struct DiskCacheError<Key: Hashable & Sendable>: Error, CustomStringConvertible {
    /// What the cache was doing.
    public enum Operation: Sendable, Equatable {
        /// Saving a value.
        case save
        /// Removing a key's value.
        case remove
        /// Removing every value.
        case removeAll
    }

    /// What the cache was doing.
    public let operation: Operation
    /// The key whose entry could not be written or removed; `nil` for ``Operation/removeAll``.
    public let key: Key?
    /// The entry's file, or the cache's directory.
    public let file: URL
    /// What the file system reported.
    public let underlyingError: any Error

    public var description: String {
        let because = reason(of: underlyingError)
        return switch operation {
        case .save:
            "The disk cache could not save the value for \(key.map { "\($0)" } ?? "a key") to \(file.path): \(because)."
        case .remove:
            "The disk cache could not remove the value for \(key.map { "\($0)" } ?? "a key") at \(file.path): \(because)."
        case .removeAll: "The disk cache could not remove every value in \(file.path): \(because)."
        }
    }
}
