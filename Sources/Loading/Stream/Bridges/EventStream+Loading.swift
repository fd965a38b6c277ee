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

    /// Saves values to `cache` debounced: the last value of a burst is saved once no newer value has come for
    /// `interval` on `scheduler`, and a value still waiting when the subscription ends (by completion or cancel)
    /// is saved at once, so the last state is always the one saved. Values pass downstream without waiting.
    ///
    /// ```swift
    /// liveLists.caching(to: memory).caching(to: database, debounce: .milliseconds(500), scheduler: .global())
    /// ```
    public func caching<C: Cache, S: Scheduler>(
        to cache: C,
        debounce interval: Duration,
        scheduler: S,
        onSaveFailure: (@Sendable (any Error) -> Void)? = nil
    ) -> EventStream where C.Value == Output {
        EventStream { observer in
            let pending = StreamSubject<Output, Never>()
            let saver = pending.stream.debounce(for: interval, scheduler: scheduler).sink { value in
                cache.save(value) { result in
                    if case .failure(let error) = result { onSaveFailure?(error) }
                }
            }
            observer.onTermination {
                pending.send(completion: .finished)  // flushes a waiting value
                saver.cancel()
            }
            handleEvents(receiveOutput: { pending.send($0) }).subscribe(observer)
        }
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
