extension EventStream {
    /// Sends a value only once `interval` has passed on `scheduler` without a newer value: a burst becomes its last
    /// value.
    ///
    /// ```swift
    /// let saving = updatedLists.debounce(for: .milliseconds(500), scheduler: .global())
    ///     .sink { list in database.save(list) { _ in } } // a handful of writes for a burst of updates
    /// ```
    /// When the upstream finishes, a value still waiting is sent at once, then `.finished`, so the last value is
    /// never lost; a failure is sent at once and drops the waiting value. Values are delivered on the scheduler.
    public func debounce<S: Scheduler>(for interval: Duration, scheduler: S) -> EventStream {
        EventStream { observer in
            let serial = SerializedObserver(observer)
            let pending = Locked<(generation: Int, value: Output?, timer: (any CancellationToken)?)>((0, nil, nil))
            let upstream = observer.lifetime.makeChild()
            observer.lifetime.onEnd {
                pending.withLock { $0.timer }?.cancel()
            }
            subscribe(
                StreamObserver(lifetime: upstream) { event in
                    switch event {
                    case .value(let value):
                        let (generation, previous, replaced) = pending.withLock { state in
                            state.generation += 1
                            return (
                                state.generation, exchange(&state.timer, with: nil), exchange(&state.value, with: value)
                            )
                        }
                        previous?.cancel()
                        withExtendedLifetime(replaced) {}  // the superseded value is released after unlocking
                        let timer = scheduler.schedule(after: interval) {
                            let due = pending.withLock { state -> Output? in
                                guard state.generation == generation else { return nil }
                                defer { state.value = nil }
                                return state.value
                            }
                            if let due { serial.send(.value(due)) }
                        }
                        let isCurrent = pending.withLock { state -> Bool in
                            guard state.generation == generation else { return false }
                            state.timer = timer
                            return true
                        }
                        if !isCurrent { timer.cancel() }
                    case .completion(let completion):
                        upstream.end()
                        let (waiting, timer) = pending.withLock { state in
                            state.generation += 1
                            defer {
                                state.value = nil
                                state.timer = nil
                            }
                            return (state.value, state.timer)
                        }
                        timer?.cancel()
                        if case .finished = completion, let waiting { serial.send(.value(waiting)) }
                        serial.send(.completion(completion))
                    }
                })
        }
    }
}
