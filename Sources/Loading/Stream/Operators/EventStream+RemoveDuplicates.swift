extension EventStream where Output: Equatable {
    /// Sends a value only when it differs from the previous one sent.
    ///
    /// ```swift
    /// let lists = friends.removeDuplicates() // no re-render when a refresh returns the same list
    /// ```
    public func removeDuplicates() -> EventStream {
        removeDuplicates(by: ==)
    }
}

extension EventStream {
    /// Sends a value only when `isDuplicate(previous, value)` is `false` for the previous value sent.
    public func removeDuplicates(by isDuplicate: @escaping @Sendable (Output, Output) -> Bool) -> EventStream {
        EventStream { observer in
            let previous = Locked<Output?>(nil)
            subscribe(
                observer.with { event in
                    if case .value(let value) = event {
                        // Events never overlap: compare outside the lock, then store.
                        if let last = previous.withLock({ $0 }), isDuplicate(last, value) { return }
                        let replaced = previous.withLock { exchange(&$0, with: value) }
                        withExtendedLifetime(replaced) {}
                    }
                    observer.receive(event)
                })
        }
    }
}
