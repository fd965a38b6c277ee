#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where a ``Store``'s shown value came from.
public enum StoreOrigin: Sendable, Equatable {
    /// A cache level, by name.
    case cache(String)
    /// The network (a fetch).
    case network
    /// A write or an optimistic change made through the store.
    case local
}

/// What a ``Store`` shows for a key: its value (`nil` when it has none, after a removal or a clear), where it came
/// from and when it was saved.
public struct StoreResponse<Value: Sendable>: Sendable {
    // One immutable reference: a response is sent to every observer of its key and through each operator they
    // chain, and a copy is then one retain, even where the store's generic code copies it at run time.
    @usableFromInline let storage: StoreResponseStorage<Value?>

    /// The shown value: the confirmed value with the pending changes applied; `nil` when there is none.
    @inlinable
    public var value: Value? { storage.value }
    /// Where the confirmed value came from (``StoreOrigin/local`` while changes are pending).
    @inlinable
    public var origin: StoreOrigin { storage.origin }
    /// When the confirmed value was saved (for a cache hit, when the level saved it).
    @inlinable
    public var savedAt: Date? { storage.savedAtSeconds.map(Date.init(timeIntervalSinceReferenceDate:)) }
    /// Whether optimistic changes are still waiting for their commit.
    @inlinable
    public var hasPendingChanges: Bool { storage.hasPendingChanges }
    /// The failure of the read that produced this response, when it fell back to the value already shown.
    @inlinable
    public var error: (any Error)? { storage.error }
    @inlinable
    var version: Int { storage.version }

    @inlinable
    init(
        value: Value?, origin: StoreOrigin, savedAt: Date?, hasPendingChanges: Bool, error: (any Error)?, version: Int
    ) {
        self.init(
            value: value, origin: origin, savedAtSeconds: savedAt?.timeIntervalSinceReferenceDate,
            hasPendingChanges: hasPendingChanges, error: error, version: version)
    }

    /// A response whose saved date is given as seconds since the reference date (as the store keeps it).
    @inlinable
    init(
        value: Value?, origin: StoreOrigin, savedAtSeconds: Double?, hasPendingChanges: Bool, error: (any Error)?,
        version: Int
    ) {
        storage = StoreResponseStorage(
            value: value, origin: origin, savedAtSeconds: savedAtSeconds, hasPendingChanges: hasPendingChanges,
            error: error, version: version)
    }

    /// How old the confirmed value is at `date`.
    public func age(at date: Date = Date()) -> Duration? {
        savedAt.map { .seconds(date.timeIntervalSince($0)) }
    }
}

/// What a ``StoreResponse`` holds. It is generic over the optional value itself (`Value?`), not over `Value`: its
/// deinitializer then destroys `value` with the type its own metadata names, where a `Value?` field would make every
/// release look up the metadata of `Optional<Value>` at run time. The saved date is kept as seconds for the same
/// reason (`Date` comes from a resilient module).
@usableFromInline
final class StoreResponseStorage<OptionalValue: Sendable>: Sendable {
    @usableFromInline let value: OptionalValue
    @usableFromInline let origin: StoreOrigin
    @usableFromInline let savedAtSeconds: Double?
    @usableFromInline let hasPendingChanges: Bool
    @usableFromInline let error: (any Error)?
    @usableFromInline let version: Int

    @inlinable
    init(
        value: OptionalValue, origin: StoreOrigin, savedAtSeconds: Double?, hasPendingChanges: Bool,
        error: (any Error)?, version: Int
    ) {
        self.value = value
        self.origin = origin
        self.savedAtSeconds = savedAtSeconds
        self.hasPendingChanges = hasPendingChanges
        self.error = error
        self.version = version
    }
}

/// Errors a ``Store`` reports.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// A fetched value was dropped because the key was removed or the store cleared while it was in flight.
    case discarded
    /// An optimistic change was pending when the store was cleared: it was undone and its commit cancelled.
    case cleared

    public var description: String {
        switch self {
        case .discarded:
            "The fetched value was discarded: the key was removed or the store cleared while it was being fetched."
        case .cleared: "The change was undone: the store was cleared before the server confirmed it."
        }
    }
}

/// A confirmed value of a ``Store`` key, with where it came from and when it was saved.
@usableFromInline
struct StoredValue<Value: Sendable>: Sendable {
    @usableFromInline let value: Value
    @usableFromInline let origin: StoreOrigin
    // Seconds since the reference date rather than a `Date`, which (from a resilient module) would make copies
    // run generic code at run time.
    @usableFromInline let savedAtSeconds: Double

    @inlinable
    var savedAt: Date { Date(timeIntervalSinceReferenceDate: savedAtSeconds) }

    @inlinable
    init(value: Value, origin: StoreOrigin, savedAt: Date) {
        self.value = value
        self.origin = origin
        savedAtSeconds = savedAt.timeIntervalSinceReferenceDate
    }
}
