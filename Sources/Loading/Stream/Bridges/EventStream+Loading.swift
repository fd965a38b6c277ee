extension EventStream {
    /// Switches to `fallback` when this stream fails: the stream form of ``Loader/fallback(to:)``.
    ///
    /// ```swift
    /// memory.asStream()
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

    /// Saves every value to `cache` as it passes, before the downstream sees it: the stream form of
    /// ``Loader/caching(to:policy:)``. Failures are never cached.
    ///
    /// The save is started and the value delivered without waiting for it; a failed save is passed to
    /// `onSaveFailure` when given, and otherwise ignored.
    public func caching<C: Cache>(
        to cache: C,
        onSaveFailure: (@Sendable (any Error) -> Void)? = nil
    ) -> EventStream where C.Value == Output {
        handleEvents(receiveOutput: { value in
            cache.save(value) { result in
                if case .failure(let error) = result { onSaveFailure?(error) }
            }
        })
    }

    /// Passes the error of a failure to `log` before delivering it unchanged.
    ///
    /// ```swift
    /// api.friends().asStream().logErrors { logger.error("\($0)") }
    /// ```
    public func logErrors(to log: @escaping @Sendable (Failure) -> Void) -> EventStream {
        handleEvents(receiveCompletion: { completion in
            if case .failure(let error) = completion { log(error) }
        })
    }
}
