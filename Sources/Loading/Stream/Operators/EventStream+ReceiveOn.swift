extension EventStream {
    /// Delivers every event on `scheduler`, in order and one at a time, even on a concurrent queue.
    ///
    /// ```swift
    /// let subscription = friends.receive(on: .main).sink { list in render(list) }
    /// ```
    /// With ``MainQueueScheduler`` an event that arrives on the main queue with nothing queued ahead is delivered
    /// inline. Once the subscription is cancelled, events still waiting for the scheduler are dropped.
    public func receive<S: Scheduler>(on scheduler: S) -> EventStream {
        EventStream { observer in
            let relay = ReceiveOnRelay(observer: observer, scheduler: scheduler)
            let upstream = observer.lifetime.makeChild()
            subscribe(
                StreamObserver(lifetime: upstream) { event in
                    if event.isCompletion { upstream.end() }
                    relay.enqueue(event)
                })
        }
    }
}

/// The queue of events waiting for a scheduler, drained by one scheduled action at a time.
private final class ReceiveOnRelay<Output: Sendable, Failure: Error, S: Scheduler>: Sendable {
    private struct State: Sendable {
        var queue: [StreamEvent<Output, Failure>] = []
        var isScheduled = false
    }

    private let state = Locked(State())
    private let observer: StreamObserver<Output, Failure>
    private let scheduler: S

    init(observer: StreamObserver<Output, Failure>, scheduler: S) {
        self.observer = observer
        self.scheduler = scheduler
    }

    func enqueue(_ event: StreamEvent<Output, Failure>) {
        let needsDrain = state.withLock { state -> Bool in
            state.queue.append(event)
            guard !state.isScheduled else { return false }
            state.isScheduled = true
            return true
        }
        if needsDrain { scheduler.schedule { self.drain() } }
    }

    private func drain() {
        while true {
            let batch = state.withLock { state -> [StreamEvent<Output, Failure>] in
                if state.queue.isEmpty { state.isScheduled = false }
                defer { state.queue = [] }
                return state.queue
            }
            if batch.isEmpty { return }
            for event in batch {
                guard observer.lifetime.isActive else { return }
                observer.receive(event)
            }
        }
    }
}
