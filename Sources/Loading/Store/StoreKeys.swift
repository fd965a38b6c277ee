/// The keys of a store, each given a slot (an `Int`) while the store's machine uses it: the machine knows keys by
/// their slots. Not generic: a key is kept as the object the store's face made of it (``StoreKey``), found by its hash
/// value and recognized by the face's own comparison. A slot is given back once the machine no longer holds the key
/// (no entry, and not among the keys it remembers as refreshed) and reused for another key.
struct StoreKeys: Sendable {
    /// A key as this table keeps it: the object the face made of it.
    typealias Object = AnyStoreKey

    /// The slots, found by their key's hash value (hashed once, by the key's type, not again by a dictionary).
    private var chains = HashChains()
    /// Each slot's key; `nil` for a free slot, or one given for an event and not kept yet.
    private var objects: [Object?] = []
    private var free: [Int] = []
    /// Keys whose kept values the bound let go of, for the store's events.
    private var evicted: [Object] = []

    init() {}

    /// The number of keys that have a slot.
    private(set) var count = 0

    /// The number of slots ever made, free ones included.
    var capacity: Int { objects.count }

    /// The slot of the key with `hash` that `isKey` recognizes, if it has one.
    func slot(hash: Int, where isKey: (Object) -> Bool) -> Int? {
        chains.slot(hash: hash) { slot in objects[slot].map(isKey) ?? false }
    }

    /// The key `slot` was given to, as the store's core holds it.
    func ref(at slot: Int) -> StoreKeyRef {
        StoreKeyRef(object: object(at: slot), hash: chains.hash(of: slot))
    }

    /// The key `slot` was given to.
    func object(at slot: Int) -> Object {
        guard let object = objects[slot] else { preconditionFailure("A slot the store's machine holds has no key") }
        return object
    }

    /// A slot for a key that has none, for an event: kept with ``keep(_:_:hash:)`` when the event leaves the
    /// machine using it, given back with ``giveBack(_:)`` otherwise.
    mutating func takeSlot() -> Int {
        if let slot = free.popLast() { return slot }
        objects.append(nil)
        return chains.addSlot()
    }

    /// Keeps `object`, whose hash value is `hash`, in `slot`, which ``takeSlot()`` gave.
    mutating func keep(_ object: Object, _ slot: Int, hash: Int) {
        objects[slot] = object
        chains.link(slot, hash: hash)
        count += 1
    }

    /// Gives back a slot ``takeSlot()`` gave for an event that left nothing of its key.
    mutating func giveBack(_ slot: Int) {
        free.append(slot)
    }

    /// Forgets the key of `slot`, if it has one, and gives the slot back. Returns the key, for the caller to let go
    /// of where no lock is held (it may be the last copy of a user's key, whose deinitializer is the user's code).
    mutating func release(_ slot: Int) -> Object? {
        guard let object = objects[slot] else { return nil }
        objects[slot] = nil
        count -= 1
        chains.unlink(slot)
        free.append(slot)
        return object
    }

    /// Notes that the bound let go of the kept value of `slot`'s key, for the store's events.
    mutating func noteEvicted(_ slot: Int) {
        evicted.append(object(at: slot))
    }

    /// The keys noted by ``noteEvicted(_:)`` since the last call.
    mutating func takeEvicted() -> [Object] {
        exchange(&evicted, with: [])
    }
}

/// A key as a core that is not generic keeps it (a store's, a memory cache's): the object the face made of it (a
/// ``StoreKey``), of a type the core does not know.
@usableFromInline
typealias AnyStoreKey = any AnyObject & Sendable

/// A key as the store's core holds it between its lock rounds: the object the face made of it and its hash value, so
/// that the core, which is not generic, finds the key's slot again.
struct StoreKeyRef: Sendable {
    let object: StoreKeys.Object
    let hash: Int

    init(object: StoreKeys.Object, hash: Int) {
        self.object = object
        self.hash = hash
    }

    /// The key's own comparisons.
    private var key: any StoreKeyObject {
        guard let key = object as? any StoreKeyObject else { preconditionFailure("A store's key of no key type") }
        return key
    }

    /// Whether `other` is the same key (compared when it is not the same object: the key was let go of and made
    /// again meanwhile).
    func isSameKey(as other: StoreKeys.Object) -> Bool {
        key.isSameKey(as: other)
    }

    /// The key, as an invalidation's predicate is given it.
    var anyKey: any Sendable { key.anyKey }

    /// Whether `key` (a predicate's key, of the store's key type or not) is this key.
    func matches(_ key: any Sendable) -> Bool {
        self.key.matches(key)
    }
}

/// What a store's key knows of its type, for the store's core.
protocol StoreKeyObject: AnyObject, Sendable {
    /// Whether `other` is the same key.
    func isSameKey(as other: StoreKeys.Object) -> Bool
    /// The key, as an invalidation's predicate is given it.
    var anyKey: any Sendable { get }
    /// Whether `key` is this key.
    func matches(_ key: any Sendable) -> Bool
}

/// A key as the table of a ``Store`` or of a ``MemoryCache`` keeps it: made once, when the table begins to hold the
/// key.
@usableFromInline
final class StoreKey<Key: Hashable & Sendable>: StoreKeyObject {
    @usableFromInline let key: Key

    @usableFromInline
    init(_ key: Key) {
        self.key = key
    }

    /// Whether `object` is `key`.
    @inlinable
    static func isKey(_ object: AnyStoreKey, _ key: Key) -> Bool {
        // Not an optional compared with the key: unspecialized, that builds an optional key and a pair of them.
        guard let stored = object as? StoreKey<Key> else { return false }
        return stored.key == key
    }

    /// The key `object` is, known to be of this type.
    @inlinable
    static func key(of object: AnyStoreKey) -> Key {
        guard let stored = object as? StoreKey<Key> else { preconditionFailure("A store's key of another type") }
        return stored.key
    }

    func isSameKey(as other: StoreKeys.Object) -> Bool {
        Self.isKey(other, key)
    }

    var anyKey: any Sendable { key }

    func matches(_ key: any Sendable) -> Bool {
        (key as? Key) == self.key
    }
}
