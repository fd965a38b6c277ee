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
/// entry whole; ``removeAll(completion:)`` deletes such leftovers too. Failed writes and removals are reported as
/// ``DiskCacheError``s.
public final class DiskCache<Key: Hashable & Sendable & Codable, Value: Sendable & Codable>: KeyedCache {
    /// The directory the entries are kept in.
    public let directory: URL
    private let expiry: CacheExpiry<Value>
    private let now: @Sendable () -> Date
    private let queue: DispatchQueue

    /// Creates a cache keeping its entries in `directory` (created when missing).
    /// - Parameters:
    ///   - directory: a directory of the cache's own; ``removeAll(completion:)`` empties it.
    ///   - expiry: how long a value stays fresh.
    ///   - now: the clock saves are stamped with and expiry is judged against.
    public init(
        directory: URL,
        expiry: CacheExpiry<Value> = .never,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.directory = directory
        self.expiry = expiry
        self.now = now
        queue = DispatchQueue(label: "Loading.DiskCache")
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
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try replace(file, with: data)
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
                    for name in names where Self.isOwnFile(name) {
                        try removeFile(at: directory.appendingPathComponent(name))
                    }
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

    /// Whether `name` is an entry, or the temporary file of a write that did not finish (this cache's, or the one
    /// Foundation's atomic write made in earlier versions).
    private static func isOwnFile(_ name: String) -> Bool {
        name.hasSuffix(fileExtension) || name.hasSuffix(temporaryExtension) || name.hasPrefix(".dat.nosync")
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
        guard let data = try? Data(contentsOf: url) else { return .failure(CacheMiss.absent) }
        guard let entry = try? JSONDecoder().decode(Entry.self, from: data) else {
            try? removeFile(at: url)  // unreadable: a miss, and gone
            return .failure(CacheMiss.absent)
        }
        guard entry.key == key else { return .failure(CacheMiss.absent) }  // another key's file name collided
        guard expiry.isFresh(entry.value, savedAt: entry.savedAt, now: now()) else {
            try? removeFile(at: url)
            return .failure(CacheMiss.expired(savedAt: entry.savedAt))
        }
        return .success(CachedValue(entry.value, savedAt: entry.savedAt))
    }

    private func removeFile(at url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
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
