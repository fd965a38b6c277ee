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
}
