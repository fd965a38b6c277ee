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

/// An error of this library: it says what went wrong in a sentence, as its `description` and as Foundation's
/// `localizedDescription` alike. Every error the library throws of its own is one.
///
/// ```swift
/// do {
///     _ = try await store.refresh("u1")
/// } catch let error as any LoadingError {
///     print(error.localizedDescription)  // what went wrong, as a sentence
/// }
/// ```
public protocol LoadingError: LocalizedError, CustomStringConvertible {}

extension LoadingError {
    /// The same text as `description`.
    public var errorDescription: String? { description }
}

extension TimeoutError: LoadingError {}
extension StreamFinishedWithoutValueError: LoadingError {}
extension CacheMiss: LoadingError {}
extension StoreError: LoadingError {}
extension OfflineError: LoadingError {}
extension MutationStorageError: LoadingError {}
extension MutationQueueError: LoadingError {}
extension MutationConflictError: LoadingError {}
extension ProcessSharingError: LoadingError {}
extension DiskCacheError: LoadingError {}
extension LevelTimeoutError: LoadingError {}

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
