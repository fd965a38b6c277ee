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
        let resume: MutationOutcomes.Resume = { end in
            bridge.complete(with: .success(end.map(SettledMutation.Outcome.init)))
        }
        let (knowledge, waiter) = awaiting.withLock { outcomes -> (MutationOutcomes.Knowledge, Int?) in
            let knowledge = outcomes.outcome(of: id)
            guard case .pending = knowledge else { return (knowledge, nil) }
            return (knowledge, outcomes.addWaiter(for: id, resume))
        }
        switch knowledge {
        case .settled(let end): bridge.complete(with: .success(SettledMutation.Outcome(end)))
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
        let end = MutationEnd(settled.outcome)
        let waiting = awaiting.withLock { $0.settled(settled.id, end) }
        for resume in waiting { resume(end) }
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

/// How a mutation ended (``SettledMutation/Outcome``'s cases), in a type that does not depend on the queue's input:
/// what the queue's waiters keep is compiled once, not looked up at run time for each input type.
enum MutationEnd: Sendable {
    case accepted
    case refused(any Error)
    case discarded
    case cleared
    case sentByAnotherProcess

    /// `outcome`'s case.
    init<Input>(_ outcome: SettledMutation<Input>.Outcome) {
        switch outcome {
        case .accepted: self = .accepted
        case .refused(let error): self = .refused(error)
        case .discarded: self = .discarded
        case .cleared: self = .cleared
        case .sentByAnotherProcess: self = .sentByAnotherProcess
        }
    }
}

extension SettledMutation.Outcome {
    /// `end`'s case.
    init(_ end: MutationEnd) {
        switch end {
        case .accepted: self = .accepted
        case .refused(let error): self = .refused(error)
        case .discarded: self = .discarded
        case .cleared: self = .cleared
        case .sentByAnotherProcess: self = .sentByAnotherProcess
        }
    }
}

/// The mutations a queue holds and those it settled lately, with their outcomes, and the callers waiting for one
/// (or for the queue to settle).
struct MutationOutcomes: Sendable {
    typealias Resume = @Sendable (MutationEnd?) -> Void

    /// What the queue knows of a mutation.
    enum Knowledge {
        case pending
        case settled(MutationEnd)
        case unknown
    }

    /// How many outcomes are kept for callers asking after the mutation settled.
    static var keptOutcomes: Int { 256 }

    /// The mutations enqueued or restored (`nil` until they are told settled, then how they ended), and the order
    /// in which those kept settled: the oldest go once more than twice ``keptOutcomes`` are kept.
    private var known: [String: MutationEnd?] = [:]
    private var settledOrder: [String] = []
    /// By waiter: the mutation waited for (`nil`: the queue), and how to resume the caller.
    private var waiters: [Int: (id: String?, resume: Resume)] = [:]
    private var lastWaiter = 0
    private var queueWaiters = 0

    /// Whether a caller waits for the queue to settle.
    var waitsForTheQueue: Bool { queueWaiters > 0 }

    func outcome(of id: String) -> Knowledge {
        guard let entry = known[id] else { return .unknown }
        return entry.map { .settled($0) } ?? .pending
    }

    /// Mutation `id` is enqueued (before its id is known to anyone) or restored.
    mutating func expect(_ id: String) {
        known[id] = .some(nil)
    }

    /// Mutation `id` left the queue without settling: its enqueue failed, or a clear overtook it as it was restored.
    mutating func forget(_ id: String) -> [Resume] {
        known[id] = nil
        return takeWaiters { $0 == id }
    }

    mutating func addWaiter(for id: String?, _ resume: @escaping Resume) -> Int {
        lastWaiter += 1
        waiters[lastWaiter] = (id, resume)
        if id == nil { queueWaiters += 1 }
        return lastWaiter
    }

    /// Takes waiter `number` out; `nil` when another path resumed it already.
    mutating func take(_ number: Int) -> Resume? {
        guard let waiter = waiters.removeValue(forKey: number) else { return nil }
        if waiter.id == nil { queueWaiters -= 1 }
        return waiter.resume
    }

    /// Keeps `outcome` of mutation `id`, and takes the waiters for it out.
    mutating func settled(_ id: String, _ outcome: MutationEnd) -> [Resume] {
        known[id] = .some(outcome)
        settledOrder.append(id)
        if settledOrder.count > 2 * Self.keptOutcomes {
            for old in settledOrder.prefix(settledOrder.count - Self.keptOutcomes) { known[old] = nil }
            settledOrder.removeFirst(settledOrder.count - Self.keptOutcomes)
        }
        return takeWaiters { $0 == id }
    }

    mutating func takeQueueWaiters() -> [Resume] {
        takeWaiters { $0 == nil }
    }

    private mutating func takeWaiters(_ isTaken: (String?) -> Bool) -> [Resume] {
        guard !waiters.isEmpty else { return [] }
        var taken: [Resume] = []
        for (number, waiter) in waiters where isTaken(waiter.id) {
            waiters[number] = nil
            if waiter.id == nil { queueWaiters -= 1 }
            taken.append(waiter.resume)
        }
        return taken
    }
}
