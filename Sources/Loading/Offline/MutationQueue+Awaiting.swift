import Dispatch

// The `async` forms: enqueueing off the caller's thread, and waiting for a mutation's outcome or for the queue to
// settle.
extension MutationQueue {
    /// Saves `input` as a mutation and shows it at once, as ``enqueue(_:completion:)`` does, off the caller's thread
    /// (the save waits for the disk), and returns its id once it is saved and shown. Its outcome comes with
    /// ``outcome(of:)``. A task cancelled before the save starts enqueues nothing and throws `CancellationError`;
    /// once saved, a mutation is kept whatever happens to the task (``discard(_:)`` gives it up).
    ///
    /// ```swift
    /// let id = try await outbox.enqueue("u3")
    /// if case .refused(let error) = try await outbox.outcome(of: id) { show(error) }
    /// ```
    /// - Throws: the storage's error when the mutation could not be saved, or ``StoreError/cleared`` when a clear of
    ///   the store began while it was saved; then nothing is shown, sent or kept.
    @discardableResult
    public func enqueue(_ input: Input) async throws -> String {
        if Task.isCancelled { throw CancellationError() }
        return try await withUnsafeThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.enqueue(input, completion: { _ in }) })
            }
        }
    }

    /// How mutation `id` ended, once it is settled: at once when it settled already, among the last 256 this queue
    /// settled; `nil` when the queue knows no such mutation (not enqueued here, or settled before those).
    /// Cancelling the task ends the wait at once, with `CancellationError`; the mutation goes on.
    public func outcome(of id: String) async throws -> SettledMutation<Input>.Outcome? {
        let bridge = AsyncLoadBridge<SettledMutation<Input>.Outcome?>()
        let resume: MutationOutcomes<Input>.Resume = { bridge.complete(with: .success($0)) }
        let (knowledge, waiter) = awaiting.withLock { outcomes -> (MutationOutcomes<Input>.Knowledge, Int?) in
            let knowledge = outcomes.outcome(of: id)
            guard case .pending = knowledge else { return (knowledge, nil) }
            return (knowledge, outcomes.addWaiter(for: id, resume))
        }
        switch knowledge {
        case .settled(let outcome): bridge.complete(with: .success(outcome))
        case .unknown: bridge.complete(with: .success(nil))
        case .pending: break
        }
        return try await bridge.awaitAnswer(cancelling: stopWaiting(waiter))
    }

    /// Returns once no mutation is pending (every one settled, however it ended): at once when none is. Mutations
    /// enqueued while it waits are waited for too. Cancelling the task ends the wait at once, with
    /// `CancellationError`.
    ///
    /// ```swift
    /// try await outbox.waitUntilSettled()
    /// ```
    public func waitUntilSettled() async throws {
        let bridge = AsyncLoadBridge<Void>()
        let waiter = awaiting.withLock { $0.addWaiter(for: nil) { _ in bridge.complete(with: .success(())) } }
        wakeIfSettled()
        try await bridge.awaitAnswer(cancelling: stopWaiting(waiter))
    }

    /// Drops waiter `number` (its task was cancelled).
    private func stopWaiting(_ number: Int?) -> any CancellationToken {
        AnyCancellationToken { [weak self] in
            guard let number else { return }
            let taken = self?.awaiting.withLock { $0.take(number) }
            withExtendedLifetime(taken) {}  // released after unlocking
        }
    }

    /// Tells the callers waiting for mutation `settled` how it ended, and keeps it among the latest outcomes.
    func tellWaiters(_ settled: SettledMutation<Input>) {
        let waiting = awaiting.withLock { $0.settled(settled.id, settled.outcome) }
        for resume in waiting { resume(settled.outcome) }
    }

    /// Mutation `id` left the queue without settling (its enqueue failed, or a clear overtook it as it was restored):
    /// a caller waiting for it learns that the queue knows no such mutation.
    func forgetAwaited(_ id: String) {
        for resume in awaiting.withLock({ $0.forget(id) }) { resume(nil) }
    }

    /// Ends the waits for the queue to settle when no mutation is pending.
    func wakeIfSettled() {
        guard awaiting.withLock({ $0.waitsForTheQueue }), !isMutating else { return }
        for resume in awaiting.withLock({ $0.takeQueueWaiters() }) { resume(nil) }
    }
}

/// The mutations a queue holds and those it settled lately, with their outcomes, and the callers waiting for one
/// (or for the queue to settle).
struct MutationOutcomes<Input: Sendable>: Sendable {
    typealias Outcome = SettledMutation<Input>.Outcome
    typealias Resume = @Sendable (Outcome?) -> Void

    /// What the queue knows of a mutation.
    enum Knowledge {
        case pending
        case settled(Outcome)
        case unknown
    }

    /// How many outcomes are kept for callers asking after the mutation settled.
    static var keptOutcomes: Int { 256 }

    /// The mutations enqueued or restored, until they are told settled (or never shown: a failed enqueue).
    private var pending = Set<String>()
    private var latest: [String: Outcome] = [:]
    private var latestOrder: [String] = []
    /// By waiter: the mutation waited for (`nil`: the queue), and how to resume the caller.
    private var waiters: [Int: (id: String?, resume: Resume)] = [:]
    private var lastWaiter = 0

    /// Whether a caller waits for the queue to settle.
    var waitsForTheQueue: Bool { waiters.values.contains { $0.id == nil } }

    func outcome(of id: String) -> Knowledge {
        if pending.contains(id) { return .pending }
        return latest[id].map { .settled($0) } ?? .unknown
    }

    /// Mutation `id` is enqueued (before its id is known to anyone) or restored.
    mutating func expect(_ id: String) {
        pending.insert(id)
    }

    /// Mutation `id` left the queue without settling: its enqueue failed, or a clear overtook it as it was restored.
    mutating func forget(_ id: String) -> [Resume] {
        pending.remove(id)
        return takeWaiters { $0 == id }
    }

    mutating func addWaiter(for id: String?, _ resume: @escaping Resume) -> Int {
        lastWaiter += 1
        waiters[lastWaiter] = (id, resume)
        return lastWaiter
    }

    /// Takes waiter `number` out; `nil` when another path resumed it already.
    mutating func take(_ number: Int) -> Resume? {
        waiters.removeValue(forKey: number)?.resume
    }

    /// Keeps `outcome` of mutation `id`, and takes the waiters for it out.
    mutating func settled(_ id: String, _ outcome: Outcome) -> [Resume] {
        pending.remove(id)
        latest[id] = outcome
        latestOrder.append(id)
        if latestOrder.count > 2 * Self.keptOutcomes {
            for old in latestOrder.prefix(latestOrder.count - Self.keptOutcomes) { latest[old] = nil }
            latestOrder.removeFirst(latestOrder.count - Self.keptOutcomes)
        }
        return takeWaiters { $0 == id }
    }

    mutating func takeQueueWaiters() -> [Resume] {
        takeWaiters { $0 == nil }
    }

    private mutating func takeWaiters(_ isTaken: (String?) -> Bool) -> [Resume] {
        let taken = waiters.filter { isTaken($0.value.id) }
        for number in taken.keys { waiters[number] = nil }
        return taken.values.map(\.resume)
    }
}
