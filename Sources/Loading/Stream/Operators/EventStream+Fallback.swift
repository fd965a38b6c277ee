extension EventStream {
    /// Switches to `fallback` when this stream fails: the stream form of ``Loader/fallback(to:)``.
    ///
    /// ```swift
    /// let friends = memory.asStream()
    ///     .fallback(to: database.asStream().caching(to: memory))
    ///     .fallback(to: remote.asStream().caching(to: database).caching(to: memory))
    /// ```
    /// `fallback` is subscribed only after this stream failed (a stream is a lazy description); when both fail,
    /// the fallback's error is delivered.
    public func fallback<NewFailure: Error>(
        to fallback: EventStream<Output, NewFailure>
    ) -> EventStream<Output, NewFailure> {
        self.catch { _ in fallback }
    }
}
