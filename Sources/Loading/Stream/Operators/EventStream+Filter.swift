extension EventStream {
    /// Sends only the values that satisfy `isIncluded`.
    ///
    /// ```swift
    /// let nonEmpty = friends.filter { !$0.isEmpty }
    /// ```
    @inlinable
    public func filter(_ isIncluded: @escaping @Sendable (Output) -> Bool) -> EventStream {
        EventStream { observer in
            subscribe(
                observer.with { event in
                    if case .value(let value) = event, !isIncluded(value) { return }
                    observer.receive(event)
                })
        }
    }
}
