extension EventStream {
    /// A stream whose `makeStream` runs anew for each subscription, so that its work starts only then.
    ///
    /// ```swift
    /// let load = EventStream.deferred { EventStream.future { promise in api.fetch(completion: promise) } }
    /// ```
    @inlinable
    public static func deferred(_ makeStream: @escaping @Sendable () -> EventStream) -> EventStream {
        EventStream { observer in makeStream().subscribe(observer) }
    }

    /// A stream that sends `value`, then finishes.
    @inlinable
    public static func just(_ value: Output) -> EventStream {
        EventStream { observer in
            observer.send(value)
            observer.finish()
        }
    }

    /// A stream that fails at once with `error`.
    @inlinable
    public static func fail(_ error: Failure) -> EventStream {
        EventStream { observer in observer.fail(error) }
    }

    /// A stream that finishes at once without a value (or, with `completeImmediately: false`, never sends anything).
    @inlinable
    public static func empty(completeImmediately: Bool = true) -> EventStream {
        EventStream { observer in
            if completeImmediately { observer.finish() }
        }
    }

    /// A stream that sends the elements of `sequence` in order, then finishes; it stops early when cancelled.
    ///
    /// ```swift
    /// let numbers = EventStream<Int, Never>.sequence([1, 2, 3])
    /// ```
    @inlinable
    public static func sequence<S: Sequence & Sendable>(_ sequence: S) -> EventStream where S.Element == Output {
        EventStream { observer in
            for element in sequence {
                if observer.isCancelled { return }
                observer.send(element)
            }
            observer.finish()
        }
    }
}

extension EventStream where Failure == any Error {
    /// A stream that runs `operation` in a new Task for each subscription and sends its result; cancelling the
    /// subscription cancels the Task.
    ///
    /// This is `deferred { future { ... } }` for async code:
    /// ```swift
    /// let users = EventStream.task { try await authenticator.authenticate() }
    ///     .flatMap { _ in api.users() }
    /// ```
    @inlinable
    public static func task(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable () async throws -> Output
    ) -> EventStream {
        EventStream { observer in
            let task = Task(priority: priority) {
                do {
                    let value = try await operation()
                    observer.send(value)
                    observer.finish()
                } catch {
                    observer.fail(error)
                }
            }
            observer.onTermination { task.cancel() }
        }
    }
}

extension EventStream where Failure == any Error {
    /// A stream of the elements of an async sequence, iterated anew for each subscription in a Task: cancelling the
    /// subscription cancels the iteration. The stream finishes when the sequence ends and fails when it throws.
    ///
    /// The bridge from any async API to streams: an `AsyncStream` a delegate feeds, `NotificationCenter`'s
    /// notifications, a Combine publisher's `values`.
    /// ```swift
    /// let (ticks, continuation) = AsyncStream.makeStream(of: Int.self)
    /// let stream = EventStream.elements(of: ticks)
    /// continuation.yield(1)
    /// ```
    public static func elements<Elements: AsyncSequence & Sendable>(
        of sequence: Elements,
        priority: TaskPriority? = nil
    ) -> EventStream where Elements.Element == Output {
        EventStream { observer in
            let task = Task(priority: priority) {
                do {
                    for try await element in sequence {
                        observer.send(element)
                    }
                    observer.finish()
                } catch {
                    observer.fail(error)
                }
            }
            observer.onTermination { task.cancel() }
        }
    }
}
