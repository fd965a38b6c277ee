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
    // One immutable reference, not generic: a response is sent to every observer of its key and through each
    // operator they chain, a copy is one retain, and the store's core (which is not generic) makes the responses
    // that a typed store hands out as they are.
    @usableFromInline let storage: StoreResponseStorage

    /// The shown value: the confirmed value with the pending changes applied; `nil` when there is none.
    @inlinable
    public var value: Value? {
        guard let box = storage.value else { return nil }
        return (box as! ValueBox<Value>).value  // the store boxed a `Value`
    }
    /// Where the confirmed value came from (``StoreOrigin/local`` while changes are pending).
    public var origin: StoreOrigin { storage.origin }
    /// When the confirmed value was saved (for a cache hit, when the level saved it).
    public var savedAt: Date? { storage.savedAtSeconds.map(Date.init(timeIntervalSinceReferenceDate:)) }
    /// Whether optimistic changes are still waiting for their commit.
    public var hasPendingChanges: Bool { storage.hasPendingChanges }
    /// The failure of the read that produced this response, when it fell back to the value already shown.
    public var error: (any Error)? { storage.error }
    var version: Int { storage.version }

    init(
        value: Value?, origin: StoreOrigin, savedAt: Date?, hasPendingChanges: Bool, error: (any Error)?, version: Int
    ) {
        self.init(
            value: value, origin: origin, savedAtSeconds: savedAt?.timeIntervalSinceReferenceDate,
            hasPendingChanges: hasPendingChanges, error: error, version: version)
    }

    /// A response whose saved date is given as seconds since the reference date (as the store keeps it).
    init(
        value: Value?, origin: StoreOrigin, savedAtSeconds: Double?, hasPendingChanges: Bool, error: (any Error)?,
        version: Int
    ) {
        storage = StoreResponseStorage(
            value: value.map { ValueBox($0) }, origin: origin, savedAtSeconds: savedAtSeconds,
            hasPendingChanges: hasPendingChanges, error: error, version: version)
    }

    /// A response of the store's core, whose value is boxed already.
    init(
        box: (any StoreValueBox)?, origin: StoreOrigin, savedAtSeconds: Double?, hasPendingChanges: Bool,
        error: (any Error)?, version: Int
    ) {
        storage = StoreResponseStorage(
            value: box, origin: origin, savedAtSeconds: savedAtSeconds, hasPendingChanges: hasPendingChanges,
            error: error, version: version)
    }

    /// The response the store's core made, typed: the same storage.
    @inlinable
    init(_ core: StoreResponse<any StoreValueBox>) {
        storage = core.storage
    }

    /// The boxed value, as the store's core reads it.
    var box: (any StoreValueBox)? { storage.value }

    /// How old the confirmed value is at `date`.
    public func age(at date: Date = Date()) -> Duration? {
        savedAt.map { .seconds(date.timeIntervalSince($0)) }
    }
}

/// What a ``StoreResponse`` holds, whatever its value's type.
@usableFromInline
final class StoreResponseStorage: Sendable {
    @usableFromInline let value: (any StoreValueBox)?
    let origin: StoreOrigin
    let savedAtSeconds: Double?
    let hasPendingChanges: Bool
    let error: (any Error)?
    let version: Int

    init(
        value: (any StoreValueBox)?, origin: StoreOrigin, savedAtSeconds: Double?, hasPendingChanges: Bool,
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

/// A value of a store's, as its core (which is not generic) holds it: a reference, copied by a retain.
@usableFromInline
protocol StoreValueBox: AnyObject, Sendable {}

/// A value of type `Value`, boxed for a store's core; the store's typed face unboxes it.
@usableFromInline
final class ValueBox<Value: Sendable>: StoreValueBox {
    @usableFromInline let value: Value

    @inlinable
    init(_ value: Value) {
        self.value = value
    }
}

/// Errors a ``Store`` reports.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// A fetched value was dropped because the key was removed or the store cleared while it was in flight.
    case discarded
    /// An optimistic change was pending when the store was cleared: it was undone and its commit cancelled.
    case cleared
    /// A read made from inside a change of its own key (an ``Store/update(_:_:)`` transform) found no value: it does
    /// not wait for the change, which waits for it, and the key shows nothing yet (the transform is given `nil`).
    case changeInProgress

    public var description: String {
        switch self {
        case .discarded:
            "The fetched value was discarded: the key was removed or the store cleared while it was being fetched."
        case .cleared: "The change was undone: the store was cleared before the server confirmed it."
        case .changeInProgress:
            "The key has no value to read yet: the read was made from inside a change of the key, which is given that "
                + "value."
        }
    }
}

/// A confirmed value of a ``Store`` key, with where it came from and when it was saved.
struct StoredValue<Value: Sendable>: Sendable {
    let value: Value
    let origin: StoreOrigin
    // Seconds since the reference date rather than a `Date`, which (from a resilient module) would make copies
    // run generic code at run time.
    let savedAtSeconds: Double

    var savedAt: Date { Date(timeIntervalSinceReferenceDate: savedAtSeconds) }

    init(value: Value, origin: StoreOrigin, savedAt: Date) {
        self.value = value
        self.origin = origin
        savedAtSeconds = savedAt.timeIntervalSinceReferenceDate
    }

    init(value: Value, origin: StoreOrigin, savedAtSeconds: Double) {
        self.value = value
        self.origin = origin
        self.savedAtSeconds = savedAtSeconds
    }

    /// The value as the store's core keeps it.
    var boxed: StoredValue<any StoreValueBox> {
        StoredValue<any StoreValueBox>(value: ValueBox(value), origin: origin, savedAtSeconds: savedAtSeconds)
    }
}
