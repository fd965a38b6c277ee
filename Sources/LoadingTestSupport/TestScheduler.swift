import Loading

/// A scheduler whose time moves only when a test says so, so that delays (retry backoff, timeouts, debounce) are
/// asserted exactly and no test sleeps.
///
/// ```swift
/// let scheduler = TestScheduler()
/// let loader = spy.retry(.constant(.seconds(1), maxAttempts: 2), scheduler: scheduler)
/// loader.load { _ in }
/// spy.fail(with: anyError)
/// scheduler.advance(by: .milliseconds(999)) // nothing yet
/// scheduler.advance(by: .milliseconds(1))   // the second attempt starts
/// ```
/// Work scheduled without a delay waits for the next `advance` or `run`. Actions run on the thread that advances.
public final class TestScheduler: Scheduler {
    private struct Item: Sendable {
        let id: Int
        let due: Duration
        let action: @Sendable () -> Void
    }

    private struct State: Sendable {
        var now: Duration = .zero
        var nextID = 0
        var items: [Item] = []
        var log: [Duration] = []
    }

    private let state = Locked(State())

    /// Creates a scheduler whose clock starts at zero.
    public init() {}

    public var now: Duration {
        state.withLock { $0.now }
    }

    /// The delays (from the moment of scheduling) of every action scheduled so far, in order of scheduling.
    public var scheduledDelays: [Duration] {
        state.withLock { $0.log }
    }

    /// The number of actions waiting to run.
    public var pendingCount: Int {
        state.withLock { $0.items.count }
    }

    public func schedule(_ action: @escaping @Sendable () -> Void) {
        enqueue(after: .zero, action)
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any CancellationToken {
        let id = enqueue(after: delay, action)
        return AnyCancellationToken { [weak self] in
            let removed = self?.state.withLock { state -> Item? in
                state.items.firstIndex { $0.id == id }.map { state.items.remove(at: $0) }
            }
            withExtendedLifetime(removed) {}  // the action is released after unlocking
        }
    }

    @discardableResult
    private func enqueue(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.items.append(Item(id: id, due: state.now + max(delay, .zero), action: action))
            state.log.append(delay)
            return id
        }
    }

    /// Moves the clock forward by `interval`, running every action that falls due on the way, in order of due
    /// time (and of scheduling, for equal times), including actions those actions schedule.
    public func advance(by interval: Duration = .zero) {
        let deadline = now + interval
        while let item = nextItem(dueBy: deadline) {
            item.action()
        }
        state.withLock { $0.now = max($0.now, deadline) }
    }

    /// Runs every scheduled action, moving the clock as far as needed, until none is left.
    public func run() {
        while let item = nextItem(dueBy: nil) {
            item.action()
        }
    }

    private func nextItem(dueBy deadline: Duration?) -> Item? {
        state.withLock { state in
            guard
                let index = state.items.indices.min(by: {
                    (state.items[$0].due, state.items[$0].id) < (state.items[$1].due, state.items[$1].id)
                }),
                deadline.map({ state.items[index].due <= $0 }) ?? true
            else { return nil }
            let item = state.items.remove(at: index)
            state.now = max(state.now, item.due)
            return item
        }
    }
}
