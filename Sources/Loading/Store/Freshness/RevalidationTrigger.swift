/// What makes a ``Store`` fetch its observed keys that are not fresh anew (``Store/revalidate(on:)``): the app
/// coming to the foreground, the network coming back, a period of time, or any stream of events.
///
/// ```swift
/// let revalidation = store.revalidate(on: .foreground(lifecycle), .reconnect(connectivity),
///                                     .interval(.seconds(60), scheduler: .global()))
/// ```
public struct RevalidationTrigger: Sendable {
    /// Emits each time the trigger fires.
    public let events: EventStream<Void, Never>

    /// A trigger that fires on each of `events`.
    public init(_ events: EventStream<Void, Never>) {
        self.events = events
    }

    /// Fires each time the app comes to the foreground.
    public static func foreground(_ lifecycle: some AppLifecycle) -> RevalidationTrigger {
        RevalidationTrigger(lifecycle.foregrounds)
    }

    /// Fires each time the network can be reached again after it could not (not for the first state it reports).
    public static func reconnect(_ connectivity: some ConnectivityMonitor) -> RevalidationTrigger {
        let transitions = connectivity.onlineStates
            .scan((previous: Bool?.none, reconnected: false)) { state, isOnline in
                (isOnline, state.previous == false && isOnline)
            }
            .filter(\.reconnected)
            .map { _ in () }
        return RevalidationTrigger(transitions)
    }

    /// Fires every `period` on `scheduler`, starting one period after the subscription.
    public static func interval(_ period: Duration, scheduler: some Scheduler) -> RevalidationTrigger {
        RevalidationTrigger(
            EventStream { observer in
                let timer = RepeatingTimer(period: period, scheduler: scheduler) { observer.send(()) }
                observer.onTermination { timer.stop() }
                timer.start()
            })
    }
}

/// Runs `tick` every `period` until stopped: each tick schedules the next (no recursion: the scheduler runs it).
final class RepeatingTimer: Sendable {
    private let period: Duration
    private let scheduler: any Scheduler
    private let tick: @Sendable () -> Void
    private let state = Locked<(stopped: Bool, pending: (any CancellationToken)?)>((false, nil))

    init(period: Duration, scheduler: any Scheduler, tick: @escaping @Sendable () -> Void) {
        self.period = period
        self.scheduler = scheduler
        self.tick = tick
    }

    func start() {
        let token = scheduler.schedule(after: period) { [self] in
            tick()
            start()
        }
        let stopped = state.withLock { state -> Bool in
            guard !state.stopped else { return true }
            state.pending = token
            return false
        }
        if stopped { token.cancel() }
    }

    func stop() {
        let pending = state.withLock { state in
            state.stopped = true
            return exchange(&state.pending, with: nil)
        }
        pending?.cancel()
    }
}
