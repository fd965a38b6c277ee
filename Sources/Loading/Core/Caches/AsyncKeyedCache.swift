#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A cache of values by key whose operations are `async`: a database or a shared cache reached through an async
/// client (on a server, say). A ``Store`` uses it as a level through `StoreLevel.cache(_:name:timeout:)`.
///
/// ```swift
/// actor QuoteTable: AsyncKeyedCache {
///     private var rows: [String: CachedValue<Quote>] = [:]
///
///     func value(for key: String) async throws -> CachedValue<Quote>? { rows[key] }
///     func save(_ value: Quote, for key: String, savedAt: Date) async throws {
///         rows[key] = CachedValue(value, savedAt: savedAt)
///     }
///     func removeValue(for key: String) async throws { rows[key] = nil }
///     func removeAll() async throws { rows = [:] }
/// }
/// ```
/// Each operation may be cancelled (the task it runs in) when the store stops waiting for it: a timeout, or a read
/// cancelled by its caller. A failed write leaves what was stored before intact.
public protocol AsyncKeyedCache<Key, Value>: Sendable {
    /// The type of the keys.
    associatedtype Key: Hashable & Sendable
    /// The type of the stored values.
    associatedtype Value: Sendable

    /// The value stored for `key` with the date it was saved, or `nil` when there is none (or it has expired).
    func value(for key: Key) async throws -> CachedValue<Value>?

    /// Saves `value` for `key` as saved at `savedAt`, replacing what was stored. A store passes the date it learned
    /// the value, so that a value copied from one level to another keeps its age.
    func save(_ value: Value, for key: Key, savedAt: Date) async throws

    /// Removes the value stored for `key`, if any.
    func removeValue(for key: Key) async throws

    /// Removes every value.
    func removeAll() async throws
}
