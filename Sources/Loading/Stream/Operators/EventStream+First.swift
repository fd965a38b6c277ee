extension EventStream {
    /// Sends the first value, then finishes and cancels the upstream. Finishes without a value if the upstream does.
    ///
    /// ```swift
    /// let subscription = updates.first().sink { print("first update: \($0)") }
    /// ```
    public func first() -> EventStream {
        first { _ in true }
    }

    /// Sends the first value that satisfies `predicate`, then finishes and cancels the upstream.
    func first(where predicate: @escaping @Sendable (Output) -> Bool) -> EventStream {
        EventStream { observer in
            subscribe(
                observer.with { event in
                    guard observer.lifetime.isActive else { return }
                    switch event {
                    case .value(let value):
                        guard predicate(value) else { return }
                        observer.receive(.value(value))
                        observer.receive(.completion(.finished))
                        observer.lifetime.end()
                    case .completion:
                        observer.receive(event)
                    }
                })
        }
    }
}
