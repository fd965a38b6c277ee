extension EventStream {
    /// Merges `streams` into one: values as they come; finishes when all have finished; the first failure is
    /// delivered at once and cancels the others.
    ///
    /// ```swift
    /// let updates = EventStream.merge([memoryUpdates, networkUpdates, localEdits])
    /// ```
    /// Values from different threads are delivered one at a time, never overlapping.
    @inlinable
    public static func merge(_ streams: [EventStream]) -> EventStream {
        EventStream { observer in
            guard !streams.isEmpty else { return observer.finish() }
            let serial = SerializedObserver(observer)
            let group = observer.lifetime.makeChild()
            let remaining = Locked(streams.count)
            for stream in streams {
                guard group.isActive else { return }
                let child = group.makeChild()
                stream.subscribe(
                    StreamObserver(lifetime: child) { event in
                        switch event {
                        case .value:
                            serial.send(event)
                        case .completion(.finished):
                            guard child.end() else { return }
                            let isLast = remaining.withLock { remaining -> Bool in
                                remaining -= 1
                                return remaining == 0
                            }
                            if isLast { serial.send(event) }
                        case .completion(.failure):
                            serial.send(event)
                            group.end()
                        }
                    })
            }
        }
    }

    /// Merges this stream with `others`: values from all of them as they come.
    ///
    /// ```swift
    /// let friends = loadedFriends.merge(with: liveUpdates)
    /// ```
    @inlinable
    public func merge(with others: EventStream...) -> EventStream {
        .merge([self] + others)
    }
}
