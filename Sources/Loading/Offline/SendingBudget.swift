/// What ``MutationQueue/sendPending(within:clock:)`` did: the mutations settled while it ran, the failure that ended
/// it if one did, and the mutations left.
public struct MutationSendingReport<Input: Sendable>: Sendable {
    /// The mutations settled while it ran, in the order they were: accepted, refused, discarded, dropped by a logout
    /// or sent by another process.
    public internal(set) var settled: [SettledMutation<Input>] = []
    /// The transient failure that ended the sending, when one did: its mutation stays first, and is sent again later.
    public internal(set) var failure: (any Error)?
    /// The mutations still pending when it returned, oldest first: the budget ran out, the task was cancelled (the
    /// attempt it cancelled is among them), a failure ended the sending, the network was down, or another process
    /// was sending.
    public internal(set) var remaining: [PendingMutation<Input>] = []
}

/// A call sending within a budget, as the queue's ledger counts it (its events are typed: see ``SendingWatcher``).
protocol BudgetWatcher: AnyObject, Sendable {}

/// What a call of ``MutationQueue/sendPending(within:clock:)`` hears of its queue while it runs: events wait here
/// until the call takes them.
final class SendingWatcher<Input: Sendable>: BudgetWatcher {
    enum Event: Sendable {
        /// A mutation was settled.
        case settled(SettledMutation<Input>)
        /// The attempt of the first mutation failed for now: it waits for its retry.
        case failedForNow(any Error)
        /// Another process sends from the storage now.
        case busy
        /// Something the call may be waiting for happened: an enqueue, a clear ended, an attempt was cancelled.
        case changed
    }

    private let state = Locked<(events: [Event], waiter: CheckedContinuation<Void, Never>?)>(([], nil))

    func tell(_ event: Event) {
        let waiter = state.withLock { state in
            state.events.append(event)
            return state.waiter.take()
        }
        waiter?.resume()
    }

    /// The events told since the last call, waiting for one when there are none.
    func next() async -> [Event] {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                guard state.events.isEmpty else { return true }
                state.waiter = waiter
                return false
            }
            if ready { waiter.resume() }
        }
        return state.withLock { exchange(&$0.events, with: []) }
    }
}
