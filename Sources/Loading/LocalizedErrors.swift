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

extension ResourceRepository.WipedError: CustomStringConvertible, LocalizedError {
    /// What happened, for a person.
    public var description: String { "The load was abandoned: the resource was wiped (a logout) while it ran." }

    /// The same text as ``description``.
    public var errorDescription: String? { description }
}
