extension StoreMachine {
    /// A key's confirmed value: what the store holds as the key's truth, changed in one place, ``set(_:)``, by a
    /// change, a fetch, a level's value learned for a change, a removal or a clear.
    ///
    /// Invariants, which the rest of the machine relies on:
    /// - Once known, always known: before, the levels hold the key's truth and there is no value here.
    /// - `version` counts the values set, and never goes back: a reader stamped with an older one knows that the
    ///   value changed since (a level's value read then is older than the store's).
    /// - The response a read answered with at once is shared by the next such reads while neither the value nor what
    ///   the key shows changed since it was built.
    struct ConfirmedValue {
        /// The value, when known and there is one (none after a removal or a clear).
        private(set) var value: StoredValue<Value>?
        /// Whether `value` is the key's truth.
        private(set) var isKnown = false
        /// How many values were set.
        private(set) var version = 0
        /// The response a read answered with at once last, built at `version` `hitVersion`.
        private var hit: StoreResponse<Value>?
        private var hitVersion = 0

        /// Makes `newValue` (`nil`: none, the key was removed or cleared) the key's truth, as a new version. Returns
        /// the value it replaces, to release after unlocking.
        mutating func set(_ newValue: StoredValue<Value>?) -> StoredValue<Value>? {
            isKnown = true
            version += 1
            return exchange(&value, with: newValue)
        }

        /// The response a read answered with at once last, when neither the value nor what the key shows (its
        /// version `shown`) changed since: the next such read shares it.
        func sharedHit(shown: Int) -> StoreResponse<Value>? {
            guard let hit, hitVersion == version, hit.version == shown else { return nil }
            return hit
        }

        /// A new response for a read answering at once with the value, shown as version `shown` of the key, kept
        /// for the next such reads (see ``sharedHit(shown:)``); the storage of the one it replaces goes to
        /// `released`, to release after unlocking. `nil` when there is no value.
        mutating func makeHit(
            shown: Int, released: inout (any AnyObject & Sendable)?
        ) -> StoreResponse<Value>? {
            guard let value else { return nil }
            let response = StoreResponse<Value>(
                box: value.value, origin: value.origin, savedAtSeconds: value.savedAtSeconds,
                hasPendingChanges: false, error: nil, version: shown)
            released = hit?.storage
            (hit, hitVersion) = (response, version)
            return response
        }
    }
}
