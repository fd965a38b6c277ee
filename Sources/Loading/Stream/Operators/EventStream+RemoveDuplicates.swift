extension EventStream where Output: Equatable {
    /// Sends a value only when it differs from the previous one sent.
    ///
    /// ```swift
    /// friends.removeDuplicates() // no re-render when a refresh returns the same list
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
                        let isNew = previous.withLock { previous -> Bool in
                            if let last = previous, isDuplicate(last, value) { return false }
                            previous = value
                            return true
                        }
                        guard isNew else { return }
                    }
                    observer.receive(event)
                })
        }
    }
}
