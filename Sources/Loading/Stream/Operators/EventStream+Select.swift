extension EventStream {
    /// Sends the part of each value `part` picks, only when it differs from the part sent before: a screen that
    /// shows one field of a value renders again only when that field changes.
    ///
    /// ```swift
    /// let names = store.changes(for: "u1").select { $0.value?.name }   // a new name, not every change of u1
    /// ```
    public func select<Part: Equatable & Sendable>(
        _ part: @escaping @Sendable (Output) -> Part
    ) -> EventStream<Part, Failure> {
        map(part).removeDuplicates()
    }

    /// Sends the value at `keyPath` of each value, only when it differs from the one sent before.
    ///
    /// ```swift
    /// let values = store.changes(for: "u1").select(\.value)   // no repeat when a refresh brings the same value
    /// ```
    public func select<Part: Equatable & Sendable>(
        _ keyPath: any KeyPath<Output, Part> & Sendable
    ) -> EventStream<Part, Failure> {
        select { $0[keyPath: keyPath] }
    }
}
