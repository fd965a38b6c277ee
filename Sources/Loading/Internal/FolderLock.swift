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

/// An advisory lock on a file (`flock`): held by one process exclusively or by several shared, released when the
/// holder releases it or dies.
struct FolderLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock; `nil` when it is held elsewhere and `waits` is false.
    init?(_ file: URL, exclusive: Bool, waits: Bool) throws {
        let descriptor = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(errno) }
        let operation = (exclusive ? LOCK_EX : LOCK_SH) | (waits ? 0 : LOCK_NB)
        while flock(descriptor, Int32(operation)) != 0 {
            if errno == EINTR { continue }
            let error = errno
            close(descriptor)
            if error == EWOULDBLOCK { return nil }
            throw POSIXError(error)
        }
        self.descriptor = descriptor
    }

    /// Releases the lock.
    func release() {
        close(descriptor)
    }
}
