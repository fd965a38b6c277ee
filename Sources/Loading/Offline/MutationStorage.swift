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
/// - A file that cannot be read (another format, a truncated disk) is moved aside with the extension `.unreadable`,
///   never deleted, and reported to the queue's `onStorageFailure`; the others load.
/// - One mutation per id: a copy of a mutation's file (a restored backup) is removed when the folder is loaded.
/// - **Several processes may share the directory** (an app and its extension): a process never touches another's
///   temporary files, and the queues over it send one at a time; a mutation one process sent is not sent again by
///   another. The coordination uses advisory locks on two files in the directory, `.lock` and `.sending.lock`.
public final class FileMutationStorage<Input: Codable & Sendable>: MutationStorage, ProcessSharedMutationStorage {
    /// The directory the mutations are kept in.
    let directory: URL

    /// Creates storage in `directory` (created when missing).
    public init(directory: URL) {
        self.directory = directory
    }

    public func loadAll() throws -> [StoredMutation<Input>] {
        try loadAll(reportingUnreadable: { _ in })
    }

    func loadAll(reportingUnreadable report: (any Error) -> Void) throws -> [StoredMutation<Input>] {
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MutationStorageError(operation: .load, id: nil, file: directory, underlyingError: error)
        }
        removeAbandonedWrites(among: names)
        var mutations: [String: StoredMutation<Input>] = [:]
        var copies: [(file: URL, mutation: StoredMutation<Input>)] = []
        for name in names.sorted() where name.hasSuffix(".mutation") {
            let file = directory.appendingPathComponent(name)
            let mutation: StoredMutation<Input>
            do {
                mutation = try JSONDecoder().decode(StoredMutation<Input>.self, from: Data(contentsOf: file))
            } catch {
                // Gone since the listing: another process settled it.
                guard FileManager.default.fileExists(atPath: file.path) else { continue }
                _ = rename(file.path, file.path + ".unreadable")
                report(MutationStorageError(operation: .load, id: nil, file: file, underlyingError: error))
                continue
            }
            guard name == fileURL(for: mutation).lastPathComponent else {
                copies.append((file, mutation))
                continue
            }
            mutations[mutation.id] = mutation
        }
        // A copy under another name: the mutation is kept under its own name, once.
        for (file, mutation) in copies {
            if mutations[mutation.id] == nil {
                guard rename(file.path, fileURL(for: mutation).path) == 0 else { continue }
                mutations[mutation.id] = mutation
            } else {
                unlink(file.path)
            }
        }
        return mutations.values.sorted { $0.sequence < $1.sequence }
    }

    public func save(_ mutation: StoredMutation<Input>) throws {
        let file = fileURL(for: mutation)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let data = try JSONEncoder().encode(mutation)
            // Writers share the folder's lock; a process cleaning up abandoned writes takes it alone.
            let lock = try FolderLock(directory.appendingPathComponent(".lock"), exclusive: false, waits: true)
            defer { lock?.release() }
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

    func claimForSending(_ mutation: StoredMutation<Input>) throws -> MutationSendingClaim {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            guard
                let lock = try FolderLock(
                    directory.appendingPathComponent(".sending.lock"), exclusive: true, waits: false)
            else { return .busy }
            guard FileManager.default.fileExists(atPath: fileURL(for: mutation).path) else {
                lock.release()
                return .gone
            }
            return .claimed(MutationSendingLease(lock.release))
        } catch {
            throw MutationStorageError(operation: .load, id: mutation.id, file: directory, underlyingError: error)
        }
    }

    func keeps(_ mutation: StoredMutation<Input>) -> Bool {
        FileManager.default.fileExists(atPath: fileURL(for: mutation).path)
    }

    /// Deletes the temporary files of writes that never finished, when no process is writing (no one else holds the
    /// folder's lock); a write under way in another process is left alone.
    private func removeAbandonedWrites(among names: [String]) {
        let abandoned = names.filter { $0.hasSuffix(".writing") }
        guard !abandoned.isEmpty,
            let lock = try? FolderLock(directory.appendingPathComponent(".lock"), exclusive: true, waits: false)
        else { return }
        defer { lock.release() }
        for name in abandoned { unlink(directory.appendingPathComponent(name).path) }
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

/// A storage that several processes may use at once: the queue claims a mutation before each attempt.
protocol ProcessSharedMutationStorage<Input>: MutationStorage {
    /// Claims `mutation` for an attempt: ``MutationSendingClaim/busy`` while another process sends from the storage,
    /// ``MutationSendingClaim/gone`` when the storage no longer keeps it (another process settled it).
    func claimForSending(_ mutation: StoredMutation<Input>) throws -> MutationSendingClaim

    /// Every mutation kept, each file that cannot be read reported.
    func loadAll(reportingUnreadable report: (any Error) -> Void) throws -> [StoredMutation<Input>]

    /// Whether the storage keeps `mutation` still (no process settled it).
    func keeps(_ mutation: StoredMutation<Input>) -> Bool
}

/// What a shared storage answers a claim for an attempt.
enum MutationSendingClaim: Sendable {
    /// The process may send; the lease (if any) is released once the attempt is settled.
    case claimed(MutationSendingLease?)
    /// Another process sends now: try again shortly.
    case busy
    /// The mutation is no longer kept: another process settled it.
    case gone
}

/// The right to send from a shared storage, held for one attempt; releasing it twice does nothing.
final class MutationSendingLease: Sendable {
    private let releaser: Locked<(@Sendable () -> Void)?>

    init(_ release: @escaping @Sendable () -> Void) {
        releaser = Locked(release)
    }

    func release() {
        releaser.withLock { $0.take() }?()
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
    init(operation: Operation, id: String?, file: URL, underlyingError: any Error) {
        self.operation = operation
        self.id = id
        self.file = file
        self.underlyingError = underlyingError
    }

    public var description: String {
        switch operation {
        case .load where id == nil && file.pathExtension == "mutation":
            "The pending change in \(file.path) could not be read and was set aside: \(reason(of: underlyingError))."
        case .load: "The pending changes in \(file.path) could not be read: \(reason(of: underlyingError))."
        case .save:
            "The pending change \(id ?? "") could not be saved to \(file.path): \(reason(of: underlyingError))."
        case .remove:
            "The pending change \(id ?? "") could not be removed from \(file.path): \(reason(of: underlyingError))."
        }
    }
}

extension POSIXError {
    /// The error of a failed system call's `errno` (an input/output error when the code is unknown).
    init(_ code: Int32) {
        self.init(POSIXError.Code(rawValue: code) ?? .EIO)
    }
}
