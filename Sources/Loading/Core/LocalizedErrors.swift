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

// Foundation's `localizedDescription` of every public error says what its `description` says.

extension TimeoutError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension StreamFinishedWithoutValueError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension CacheMiss: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension StoreError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension OfflineError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension MutationStorageError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension MutationQueueError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension ProcessSharingError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

extension DiskCacheError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}

/// What an underlying error says, for a person: its own sentence when it has one (a `LocalizedError`), the system's
/// words for a POSIX error, what a file system error of Foundation's wraps (its own text is a dump: "Error
/// Domain=NSCocoaErrorDomain Code=512 "(null)" UserInfo=…"), else its description; without a final period, to end a
/// sentence of the caller's.
func reason(of error: any Error) -> String {
    let text: String
    if error is DecodingError {
        text = "its contents are not in the format expected"
    } else if let cocoa = error as? CocoaError, let underlying = cocoa.underlying {
        return reason(of: underlying)
    } else if let localized = error as? any LocalizedError, let description = localized.errorDescription {
        text = description
    } else if let posix = error as? POSIXError {
        text = String(cString: strerror(posix.code.rawValue))
    } else {
        text = String(describing: error)
    }
    return text.hasSuffix(".") ? String(text.dropLast()) : text
}

extension LevelTimeoutError: LocalizedError {
    /// The same text as ``description``.
    public var errorDescription: String? { description }
}
