extension EventStream {
    /// This stream's events, then, once it finishes, `next`'s: the fallback-free sequencing of streams ("the cached
    /// list, then the fresh one").
    ///
    /// ```swift
    /// let cachedThenFresh = memory.asStream().replaceError(with: []).setFailureType(to: (any Error).self)
    ///     .concat(remote.asStream())
    /// ```
    /// `next` is subscribed only when this stream finishes; a failure ends the whole stream at once. Cancelling
    /// cancels whichever stream is running.
    public func concat(_ next: EventStream) -> EventStream {
        EventStream { observer in
            let first = observer.lifetime.makeChild()
            subscribe(
                StreamObserver(lifetime: first) { event in
                    switch event {
                    case .value:
                        observer.receive(event)
                    case .completion(.finished):
                        guard first.end(), observer.lifetime.isActive else { return }
                        next.subscribe(observer)
                    case .completion(.failure):
                        first.end()
                        observer.receive(event)
                    }
                })
        }
    }

    /// Sends `values` first, then this stream's events.
    func prepend(_ values: Output...) -> EventStream {
        EventStream.sequence(values).concat(self)
    }

    /// Sends this stream's events, then, when it finishes, `values`.
    func append(_ values: Output...) -> EventStream {
        concat(EventStream.sequence(values))
    }
}
