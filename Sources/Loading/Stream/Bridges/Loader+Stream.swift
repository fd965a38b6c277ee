extension Loader {
    /// This loader as a stream: each subscription starts one load and sends its value then `.finished`, or its
    /// failure. Nothing runs until a subscription; cancelling the subscription cancels the load.
    ///
    /// ```swift
    /// let friends = memory.asStream()
    ///     .fallback(to: database.asStream().caching(to: memory))
    /// ```
    public func asStream() -> EventStream<Output, any Error> {
        EventStream { observer in
            let token = load { observer.send(result: $0) }
            observer.onTermination { token.cancel() }
        }
    }
}
