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

/// Where a ``MutationQueue`` keeps its mutations so that they survive a restart: a mutation is saved before it is
/// shown, and removed once it is settled. Calls may come from any thread; a save that returns has reached the disk.
///
/// ``FileMutationStorage`` keeps one file per mutation; a database table works as well.
public protocol MutationStorage<Input>: Sendable {
    /// The type of the mutations' inputs.
    associatedtype Input: Sendable

    /// Every mutation kept, in increasing ``StoredMutation/sequence``.
    func loadAll() throws -> [StoredMutation<Input>]

    /// Keeps `mutation`, replacing the one with its id.
    func save(_ mutation: StoredMutation<Input>) throws

    /// Forgets `mutation`; forgetting one that is not kept does nothing.
    func remove(_ mutation: StoredMutation<Input>) throws
}

/// Mutations kept in a directory, one JSON file each, written through a temporary file that is synced to the disk and
/// renamed into place: a process killed mid-write leaves the previous file whole, and a save that returned survives
/// a crash of the machine too.
///
/// ```swift
/// let outbox = FileMutationStorage<RenameFriend>(directory: support.appendingPathComponent("outbox"))
/// ```
/// A file that cannot be read (another format, a truncated disk) is moved aside with the extension `.unreadable`,
/// never deleted, and the others load.
public final class FileMutationStorage<Input: Codable & Sendable>: MutationStorage {
    /// The directory the mutations are kept in.
    public let directory: URL

    /// Creates storage in `directory` (created when missing).
    public init(directory: URL) {
        self.directory = directory
    }

    public func loadAll() throws -> [StoredMutation<Input>] {
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MutationStorageError(operation: .load, id: nil, file: directory, underlyingError: error)
        }
        var mutations: [StoredMutation<Input>] = []
        for name in names.sorted() {
            let file = directory.appendingPathComponent(name)
            if name.hasSuffix(".writing") {
                try? FileManager.default.removeItem(at: file)  // a write that never finished
                continue
            }
            guard name.hasSuffix(".mutation") else { continue }
            guard let data = try? Data(contentsOf: file),
                let mutation = try? JSONDecoder().decode(StoredMutation<Input>.self, from: data)
            else {
                _ = rename(file.path, file.path + ".unreadable")
                continue
            }
            mutations.append(mutation)
        }
        return mutations.sorted { $0.sequence < $1.sequence }
    }

    public func save(_ mutation: StoredMutation<Input>) throws {
        let file = fileURL(for: mutation)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let data = try JSONEncoder().encode(mutation)
            let temporary = file.appendingPathExtension(UUID().uuidString + ".writing")
            try data.write(to: temporary)
            do {
                try sync(temporary)
                guard rename(temporary.path, file.path) == 0 else { throw POSIXError(errno) }
            } catch {
                try? FileManager.default.removeItem(at: temporary)
                throw error
            }
            try sync(directory)  // the rename itself
        } catch {
            throw MutationStorageError(operation: .save, id: mutation.id, file: file, underlyingError: error)
        }
    }

    public func remove(_ mutation: StoredMutation<Input>) throws {
        let file = fileURL(for: mutation)
        guard unlink(file.path) == 0 || errno == ENOENT else {
            throw MutationStorageError(
                operation: .remove, id: mutation.id, file: file, underlyingError: POSIXError(errno))
        }
    }

    /// The file of `mutation`: its sequence number first (zero-padded, so that names sort in queue order).
    private func fileURL(for mutation: StoredMutation<Input>) -> URL {
        let sequence = String(mutation.sequence)
        let padded = String(repeating: "0", count: max(0, 20 - sequence.count)) + sequence
        return directory.appendingPathComponent("\(padded)-\(mutation.id).mutation")
    }

    /// Flushes what the system holds of `url` (a file, or a directory's entries) to the disk.
    private func sync(_ url: URL) throws {
        let descriptor = open(url.path, O_RDONLY)
        guard descriptor >= 0 else { throw POSIXError(errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw POSIXError(errno) }
    }
}

/// Why a ``MutationStorage`` could not load, save or remove mutations: the operation, the mutation's id (none for
/// a load), the file, and the underlying error. A failed save leaves the previous file intact.
public struct MutationStorageError: Error, CustomStringConvertible {
    /// What the storage was doing.
    public enum Operation: Sendable, Equatable {
        /// Loading every mutation.
        case load
        /// Saving one.
        case save
        /// Removing one.
        case remove
    }

    /// What the storage was doing.
    public let operation: Operation
    /// The mutation's id; `nil` for ``Operation/load``.
    public let id: String?
    /// The file, or the storage's directory.
    public let file: URL
    /// What the file system reported.
    public let underlyingError: any Error

    /// Creates the error.
    public init(operation: Operation, id: String?, file: URL, underlyingError: any Error) {
        self.operation = operation
        self.id = id
        self.file = file
        self.underlyingError = underlyingError
    }

    public var description: String {
        "Could not \(operation) mutation \(id ?? "queue") at \(file.path): \(underlyingError)"
    }
}

extension POSIXError {
    fileprivate init(_ code: Int32) {
        self.init(POSIXError.Code(rawValue: code) ?? .EIO)
    }
}
