/// When a ``MutationQueue`` may send, under its lock: the attempt in flight, the wait for a retry, the clears under
/// way and the calls sending within a budget. Which mutation an attempt is for is the ``MutationLedger``'s to say.
///
/// Invariants:
/// - At most one attempt runs. Its serial tells its answer from a late answer of an attempt taken back (by a logout,
///   a discard, a cancelled budget): only the attempt whose serial is the one running is handed out by serial.
/// - Nothing begins while a clear is under way, a retry is waited for, or (unless asked by it) a call sending within
///   a budget runs.
struct MutationSending: Sendable {
    /// The attempt in flight.
    struct Attempt: Sendable {
        /// The mutation it sends.
        let id: String
        /// Tells this attempt's answer from a late answer of an earlier one.
        let serial: Int
        fileprivate(set) var token: (any CancellationToken)?
        /// This process's right to send from a storage shared with others, released when the attempt ends.
        fileprivate(set) var lease: MutationSendingLease?

        /// Ends the attempt, after unlocking: its load is cancelled and its lease released.
        func end() {
            token?.cancel()
            lease?.release()
        }
    }

    /// Whether an attempt may begin now.
    enum Gate {
        /// Yes.
        case open
        /// No: an attempt runs, a retry is waited for, or a clear is under way.
        case closed
        /// Calls sending within a budget start the attempts now: they are told instead.
        case heldForBudget
    }

    private var running: Attempt?
    private var serial = 0
    /// While a transient failure waits for its retry, or another process sends: the timer.
    private var retry: (any CancellationToken)?
    private var isWaitingToRetry = false
    /// Clears under way: nothing is sent meanwhile.
    private var clearing = 0
    /// Calls of ``MutationQueue/sendPending(within:clock:)`` running: while there are some, they start the attempts.
    private var budgets = 0
    /// The calls sending within a budget, to tell what happened.
    private(set) var watchers: [any BudgetWatcher] = []

    /// Whether an attempt may begin now; `byBudget`: asked by a call sending within a budget.
    func gate(byBudget: Bool) -> Gate {
        guard byBudget || budgets == 0 else { return .heldForBudget }
        return running == nil && !isWaitingToRetry && clearing == 0 ? .open : .closed
    }

    /// The mutation of attempt `serial`, while it runs.
    func id(of serial: Int) -> String? {
        running?.serial == serial ? running?.id : nil
    }

    // MARK: Attempts

    /// Begins an attempt of mutation `id`; returns its serial. Asked only when ``gate(byBudget:)`` is open.
    mutating func begin(_ id: String) -> Int {
        guard running == nil else { preconditionFailure("At most one attempt runs: one began while another ran") }
        serial += 1
        running = Attempt(id: id, serial: serial)
        return serial
    }

    /// Whether an attempt of mutation `id` runs.
    func isSending(_ id: String) -> Bool {
        running?.id == id
    }

    /// Keeps the lease attempt `serial` holds.
    mutating func keepLease(_ lease: MutationSendingLease?, of serial: Int) {
        guard running?.serial == serial else { return }
        running?.lease = lease
    }

    /// Keeps the token of attempt `serial`'s load; `false` when it was answered or taken back meanwhile.
    mutating func keepToken(_ token: any CancellationToken, of serial: Int) -> Bool {
        guard running?.serial == serial else { return false }
        running?.token = token
        return true
    }

    /// Takes out attempt `serial`, while it runs.
    mutating func take(_ serial: Int) -> Attempt? {
        guard running?.serial == serial else { return nil }
        return running.take()
    }

    /// Takes out the attempt in flight, when it sends mutation `id`.
    mutating func take(sending id: String) -> Attempt? {
        guard running?.id == id else { return nil }
        return running.take()
    }

    /// Takes out the attempt in flight, if any.
    mutating func takeAttempt() -> Attempt? {
        running.take()
    }

    // MARK: Retries

    /// The first mutation waits for its retry (a transient failure, another process sending): nothing begins until
    /// the wait ends.
    mutating func waitToRetry() {
        isWaitingToRetry = true
    }

    /// Keeps the timer of the retry waited for; `false` when the wait ended meanwhile (the network came back).
    mutating func keepRetry(_ timer: any CancellationToken) -> Bool {
        guard isWaitingToRetry else { return false }
        retry = timer
        return true
    }

    /// Ends the wait for a retry (it is due, the network came back, its mutation left): returns its timer, to cancel.
    mutating func endWaitToRetry() -> (any CancellationToken)? {
        isWaitingToRetry = false
        return retry.take()
    }

    // MARK: Sending within a budget

    /// A call sending within a budget begins.
    mutating func beginBudget(_ watcher: any BudgetWatcher) {
        budgets += 1
        watchers.append(watcher)
    }

    /// For a call sending within a budget, with mutations left: `true` when it starts the first (with the retry timer
    /// it replaces, to cancel), `false` when an attempt runs already.
    mutating func nextStepWithinBudget() -> (starts: Bool, retry: (any CancellationToken)?) {
        guard running == nil else { return (false, nil) }
        return (true, endWaitToRetry())
    }

    /// A call sending within a budget ends; whether the queue now waits its first retry delay before sending on its
    /// own (it does when the others stopped, online, with mutations left).
    mutating func endBudget(_ watcher: any BudgetWatcher, isOnline: Bool, hasMutations: Bool) -> Bool {
        budgets -= 1
        watchers.removeAll { $0 === watcher }
        let waits = isOnline && budgets == 0 && running == nil && !isWaitingToRetry && hasMutations
        if waits { isWaitingToRetry = true }
        return waits
    }

    // MARK: Clears

    /// A clear begins: nothing is sent until it ends. Returns the attempt in flight and the retry timer, to end.
    mutating func beginClear() -> (attempt: Attempt?, retry: (any CancellationToken)?) {
        clearing += 1
        return (running.take(), endWaitToRetry())
    }

    /// A clear ends.
    mutating func endClear() {
        guard clearing > 0 else { preconditionFailure("A clear ends only after it began") }
        clearing -= 1
    }
}
