import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// A step of a mutation queue's history: the app's calls, the server's answers, the network, the retry timer, a
/// logout and a restart of the process (a new store and a new queue over the same storage and disk).
///
/// An item created offline is inserted under a temporary id, a negative number (`.insert(-1)` creates item `-1`);
/// `.delete(-1)` names it. The server gives it the id `10 + 1` (see `Edit.serverID(of:)`).
enum QueueStep: Hashable, Sendable, CustomStringConvertible {
    /// Simpler forms of this step, for shrinking: the attempts and mutations it names by smaller numbers.
    var simpler: [QueueStep] {
        switch self {
        case .accept(let attempt) where attempt > 0: [.accept(attempt: attempt - 1), .accept(attempt: 0)]
        case .refuse(let attempt) where attempt > 0: [.refuse(attempt: attempt - 1), .refuse(attempt: 0)]
        case .failForNow(let attempt) where attempt > 0: [.failForNow(attempt: attempt - 1), .failForNow(attempt: 0)]
        case .discard(let mutation) where mutation > 1: [.discard(mutation: mutation - 1), .discard(mutation: 1)]
        case .conflict(let attempt, let copy, let answer):
            (attempt > 0 ? [.conflict(attempt: attempt - 1, copy: copy, answer: answer)] : [])
                + (copy.isEmpty ? [] : [.conflict(attempt: attempt, copy: [], answer: answer)])
                + (answer == .rebase ? [] : [.conflict(attempt: attempt, copy: copy, answer: .rebase)])
        case .resolve(let mutation, let answer) where mutation > 1:
            [.resolve(mutation: mutation - 1, answer: answer), .resolve(mutation: 1, answer: answer)]
        case .enqueueWhile(let edit, let during):
            [.enqueue(edit), during] + during.simpler.map { .enqueueWhile(edit, during: $0) }
        default: []
        }
    }

    case enqueue(Edit)
    /// An enqueue whose change is held (the first time the store applies it) while `during` happens.
    indirect case enqueueWhile(Edit, during: QueueStep)
    /// The server answers attempt `attempt` (in the order attempts reached it).
    case accept(attempt: Int)
    case refuse(attempt: Int)
    /// A transient failure: the mutation waits for its retry.
    case failForNow(attempt: Int)
    case retryTimerFires
    case online(Bool)
    case discard(mutation: Int)
    case clear
    case restart
    /// The server answers attempt `attempt` with a conflict and its copy; the app's resolver answers `answer`.
    case conflict(attempt: Int, copy: Items, answer: ConflictAnswer)
    /// The app resolves the conflict mutation `mutation` waits with (see ``ConflictAnswer/ask``).
    case resolve(mutation: Int, answer: ConflictAnswer)

    var description: String {
        switch self {
        case .enqueue(let edit): ".enqueue(\(edit))"
        case .enqueueWhile(let edit, let during): ".enqueueWhile(\(edit), during: \(during))"
        case .accept(let attempt): ".accept(attempt: \(attempt))"
        case .refuse(let attempt): ".refuse(attempt: \(attempt))"
        case .failForNow(let attempt): ".failForNow(attempt: \(attempt))"
        case .retryTimerFires: ".retryTimerFires"
        case .online(let online): ".online(\(online))"
        case .discard(let mutation): ".discard(mutation: \(mutation))"
        case .clear: ".clear"
        case .restart: ".restart"
        case .conflict(let attempt, let copy, let answer):
            ".conflict(attempt: \(attempt), copy: \(copy), answer: .\(answer))"
        case .resolve(let mutation, let answer): ".resolve(mutation: \(mutation), answer: .\(answer))"
        }
    }
}

/// How the app resolves a conflict in a queue's history.
enum ConflictAnswer: Hashable, Sendable {
    case rebase, takeServerCopy, ask

    var resolution: ConflictResolution<Numbered> {
        switch self {
        case .rebase: .rebase
        case .takeServerCopy: .takeServerCopy
        case .ask: .ask
        }
    }
}

extension Edit {
    /// The number this change names.
    var named: Int {
        switch self {
        case .insert(let number), .delete(let number): number
        }
    }

    /// The temporary id of the item this change creates offline: an insert of a negative number.
    var createdID: Int? {
        if case .insert(let number) = self, number < 0 { number } else { nil }
    }

    /// The id the server gives the item created under temporary id `temporary`.
    static func serverID(of temporary: Int) -> Int { 10 - temporary }

    /// This change, naming `number` instead.
    func naming(_ number: Int) -> Edit {
        switch self {
        case .insert: .insert(number)
        case .delete: .delete(number)
        }
    }
}

/// A server's conflict in a queue's history: its copy of the key's value.
struct ModelConflict: Error {
    let copy: Items
}

/// What a queue's history left: what the key shows, what the storage keeps, what reached the server, how each
/// mutation ended.
struct QueueCheckpoint: Equatable, CustomStringConvertible {
    var shown: Shown
    /// The mutations kept, in order, by the number they were enqueued with, with their attempts.
    var kept: [String]
    /// The mutations listed as pending, in order.
    var pending: [String]
    /// What reached the server, in order: each attempt's mutation.
    var sent: [Int]
    var outcomes: [Int: String]
    /// Whether the key was published at most once in the step, as an enqueue and an accepted change (a creation's
    /// among them: its server id shows once) publish it.
    var publishedAtMostOnce = true

    var description: String {
        """
        shown \(shown)\(publishedAtMostOnce ? "" : ", published more than once in the step")
        kept \(kept)
        pending \(pending)
        sent \(sent)
        outcomes \(outcomes.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" })
        """
    }
}

/// What a ``MutationQueue`` promises, sequentially: mutations saved, shown at once in order, sent one at a time
/// in order while online, each attempt counted before it is sent; accepted ones join the confirmed value, refused
/// ones are undone alone, transient failures wait for the retry or the network; a logout drops every mutation at
/// once (nothing of before is shown or sent after it, restarts included); a restart shows the kept mutations again and
/// sends them. An item created offline takes the id the server gives it in the value and in every mutation naming it
/// (those enqueued later in the same process too); a refused or discarded creation takes them out with it.
struct QueueModel: ModelCheck.System {
    private struct Mutation {
        let number: Int
        var edit: Edit
        var attempts = 0
        /// Waiting for the app to resolve its conflict (kept so across restarts): it holds the queue.
        var awaitsResolution = false
    }

    /// The confirmed value (the disk level keeps it across restarts).
    private var confirmed: Items?
    private var queue: [Mutation] = []
    /// The attempt in flight: its place among the attempts the server received.
    private var sending: (attempt: Int, mutation: Int)?
    private var waitingForRetry = false
    private var online = false
    /// The mutation an enqueue numbered and has not shown yet: not sent before.
    private var beingShown: Int?
    private var sent: [Int] = []
    private var outcomes: [Int: String] = [:]
    private var enqueued = 0
    /// The ids the server gave the items created offline, by temporary id, as this process knows them (a restart
    /// knows those of the creations kept only: none, as an accepted one leaves at once here).
    private var serverIDs: [Int: Int] = [:]
    /// The temporary ids given so far, for a generator's creations and the changes naming them.
    private(set) var temporaryIDs: [Int] = []

    mutating func apply(_ step: QueueStep) {
        switch step {
        case .enqueue(let edit):
            enqueued += 1
            if let created = edit.createdID { temporaryIDs.append(created) }
            queue.append(Mutation(number: enqueued, edit: serverIDs[edit.named].map(edit.naming) ?? edit))
        case .enqueueWhile(let edit, .clear):
            // A logout while the enqueue runs: the mutation was the logged-out user's, the enqueue throws, and
            // nothing of it is shown, sent or kept.
            enqueued += 1
            if let created = edit.createdID { temporaryIDs.append(created) }
            apply(.clear)
            outcomes[enqueued] = "enqueue threw: cleared"
        case .enqueueWhile(let edit, let during):
            // What happens during the enqueue comes after it is numbered, but before it is shown: it is sent once the
            // enqueue ends, and the app cannot discard it before the enqueue returned its id.
            beingShown = enqueued + 1
            apply(.enqueue(edit))
            if during != .discard(mutation: enqueued) { apply(during) }
            beingShown = nil
        case .accept(let attempt): answered(attempt, accepted: true)
        case .refuse(let attempt): answered(attempt, accepted: false)
        case .failForNow(let attempt):
            guard sending?.attempt == attempt else { break }
            sending = nil
            waitingForRetry = true
        case .retryTimerFires: waitingForRetry = false
        case .online(let isOnline):
            // The network coming back sends a mutation waiting for its retry at once; staying online changes nothing.
            if isOnline, !online { waitingForRetry = false }
            online = isOnline
        case .discard(let number): takeOut(number, as: "discarded")
        case .clear:
            for mutation in queue { outcomes[mutation.number] = "cleared" }
            queue = []
            sending = nil
            waitingForRetry = false
            confirmed = nil
            serverIDs = [:]
        case .restart:
            // A new process: nothing in flight, the network as it was, the timer gone, the server's ids forgotten.
            sending = nil
            waitingForRetry = false
            serverIDs = [:]
        case .conflict(let attempt, let copy, let answer):
            guard let sending, sending.attempt == attempt else { break }
            self.sending = nil
            // The server's copy is confirmed under the change, whatever the answer.
            confirmed = copy
            resolve(sending.mutation, answer)
        case .resolve(let number, let answer):
            guard queue.first(where: { $0.number == number })?.awaitsResolution == true else { break }
            resolve(number, answer)
        }
        sendFirst()
    }

    /// Carries out `answer` for mutation `number`, which met a conflict.
    private mutating func resolve(_ number: Int, _ answer: ConflictAnswer) {
        guard let index = queue.firstIndex(where: { $0.number == number }) else { return }
        switch answer {
        case .rebase: queue[index].awaitsResolution = false
        case .ask: queue[index].awaitsResolution = true
        case .takeServerCopy: takeOut(number, as: "replaced")  // a creation with what names its item
        }
    }

    /// Takes mutation `number` out as `outcome`, with the mutations naming the item it creates.
    private mutating func takeOut(_ number: Int, as outcome: String) {
        guard let index = queue.firstIndex(where: { $0.number == number }) else { return }
        let created = queue[index].edit.createdID
        let taken = queue.indices.filter { $0 == index || (created != nil && queue[$0].edit.named == created) }
        for index in taken.reversed() {
            let mutation = queue.remove(at: index)
            outcomes[mutation.number] = outcome
            if sending?.mutation == mutation.number { sending = nil }
        }
        if taken.first == 0 { waitingForRetry = false }
    }

    /// The attempt in flight, for a generator's answers.
    var attemptInFlight: Int? { sending?.attempt }
    /// Whether the network can be reached, for a generator's connectivity changes.
    var isOnline: Bool { online }
    /// Every attempt the server received, for late answers of cancelled ones.
    var attemptsSent: Int { sent.count }
    /// The mutations pending, for a generator's discards.
    var pendingNumbers: [Int] { queue.map(\.number) }
    /// The mutations waiting for the app to resolve their conflict, for a generator's resolutions.
    var awaitingNumbers: [Int] { queue.filter(\.awaitsResolution).map(\.number) }

    var checkpoint: QueueCheckpoint {
        let shownValue = queue.reduce(confirmed) { $1.edit.applied(to: $0) }
        return QueueCheckpoint(
            shown: Shown(value: shownValue, hasPendingChanges: !queue.isEmpty),
            kept: queue.map { "#\($0.number)×\($0.attempts)\($0.awaitsResolution ? "?" : "")" },
            pending: queue.map { "#\($0.number)" }, sent: sent, outcomes: outcomes)
    }

    private mutating func answered(_ attempt: Int, accepted: Bool) {
        guard let sending, sending.attempt == attempt,
            let index = queue.firstIndex(where: { $0.number == sending.mutation })
        else { return }
        self.sending = nil
        guard accepted else { return takeOut(sending.mutation, as: "refused") }
        let mutation = queue.remove(at: index)
        outcomes[mutation.number] = "accepted"
        guard let created = mutation.edit.createdID else {
            confirmed = mutation.edit.applied(to: confirmed)
            return
        }
        let server = Edit.serverID(of: created)
        serverIDs[created] = server
        confirmed = Edit.insert(server).applied(to: confirmed)
        for index in queue.indices where queue[index].edit.named == created {
            queue[index].edit = queue[index].edit.naming(server)
        }
    }

    private mutating func sendFirst() {
        guard online, sending == nil, !waitingForRetry, let first = queue.first, !first.awaitsResolution,
            first.number != beingShown
        else { return }
        queue[0].attempts += 1
        sent.append(queue[0].number)
        sending = (sent.count - 1, queue[0].number)
    }
}

/// The real queue a history runs on: a store over a memory level and a disk level (kept across restarts), a
/// ``MutationQueue`` over storage in memory (kept across restarts too), a server whose attempts the history answers,
/// connectivity and a retry timer it controls. A restart makes a new store and a new queue; the old ones hear nothing
/// more (their connectivity and timer are their own, and their attempt in flight never answers), as a process that
/// was ended would.
final class QueueUnderTest: ModelCheck.System {
    /// One process's store, queue and what it was given.
    private struct Launch {
        /// Cut when the process ends: nothing it does afterwards reaches the disk or the history.
        let link: ProcessLink
        let store: Store<String, Items>
        let queue: MutationQueue<String, Items, Numbered>
        let observer: StreamRecorder<StoreResponse<Items>, Never>
        let connectivity: ManualConnectivity
        let scheduler: TestScheduler
        /// The tokens of its attempts, cancelled when the process ends.
        let attempts: Locked<[any CancellationToken]>
    }

    private let clock = TestClock()
    private let disk: ModelLevel<Items>
    private let storage = ModelStorage<Numbered>()
    /// Every attempt, of every process, in the order it reached the server: a creation's success is the item's id.
    private let server = LoaderSpy<String>()
    /// What each attempt sends, in the same order.
    private let attempted = Locked<[Numbered]>([])
    private let sent = Locked<[Int]>([])
    private let outcomes = Locked<[Int: String]>([:])
    /// What the app's resolver answers to the next conflict.
    private let nextAnswer = Locked(ConflictAnswer.rebase)
    /// The ids the queue gave the mutations, by the number they were enqueued with.
    private let ids = Locked<[Int: String]>([:])
    private var online = false
    private var enqueued = 0
    private var launch: Launch
    private let rewritesValues: Bool
    /// The mutation whose change is held the first time the store applies it, and what holds it.
    private let held = Locked<(number: Int, hold: @Sendable () -> Void)?>(nil)
    private var publishedAtMostOnce = true

    /// A queue whose creations' answers rewrite the value shown when `rewritesValues` (its `replacingIDsInValue`),
    /// or apply the changes pending again.
    init(rewritesValues: Bool = true) {
        disk = ModelLevel(clock: clock)
        self.rewritesValues = rewritesValues
        launch = Self.start(
            clock: clock, disk: disk, storage: storage, online: false, server: server, attempted: attempted, sent: sent,
            outcomes: outcomes, answers: nextAnswer, rewritesValues: rewritesValues, held: held)
    }

    deinit {
        Self.end(launch)
    }

    /// Ends a process: cut from the disk, its store is cleared, which breaks the cycle a queue's pending changes make
    /// with their store (a killed process's memory is simply gone).
    private static func end(_ launch: Launch) {
        for attempt in launch.attempts.withLock({ $0 }) { attempt.cancel() }
        launch.link.cut()
        launch.store.clear()
    }

    func apply(_ step: QueueStep) {
        let published = launch.observer.values.count
        run(step)
        switch step {
        case .enqueue, .accept: publishedAtMostOnce = launch.observer.values.count - published <= 1
        default: publishedAtMostOnce = true
        }
    }

    private func run(_ step: QueueStep) {
        switch step {
        case .enqueue(let edit):
            enqueued += 1
            let mutation = Numbered(number: enqueued, edit: edit)
            Self.enqueue(mutation, on: launch.queue, link: launch.link, ids: ids, outcomes: outcomes)
        case .enqueueWhile(let edit, let during):
            enqueued += 1
            let (mutation, queue, link, ids, outcomes, held) = (
                Numbered(number: enqueued, edit: edit), launch.queue, launch.link, ids, outcomes, held
            )
            ModelCheck.whileAChangeRuns { hold in
                held.withLock { $0 = (mutation.number, hold) }
                Self.enqueue(mutation, on: queue, link: link, ids: ids, outcomes: outcomes)
            } during: {
                run(during)
            }
            held.withLock { $0 = nil }
        case .accept(let attempt):
            let created = attempted.withLock { $0.indices.contains(attempt) ? $0[attempt].edit.createdID : nil }
            server.complete(with: created.map { "\(Edit.serverID(of: $0))" } ?? "", at: attempt)
        case .refuse(let attempt): server.fail(with: Refused(), at: attempt)
        case .failForNow(let attempt): server.fail(with: URLError(.timedOut), at: attempt)
        case .retryTimerFires: launch.scheduler.advance(by: .seconds(60))
        case .online(let isOnline):
            online = isOnline
            launch.connectivity.setOnline(isOnline)
        case .discard(let number):
            if let id = id(of: number) { launch.queue.discard(id) }
        case .clear: launch.store.clear()
        case .restart:
            Self.end(launch)
            launch = Self.start(
                clock: clock, disk: disk, storage: storage, online: online, server: server, attempted: attempted,
                sent: sent, outcomes: outcomes, answers: nextAnswer, rewritesValues: rewritesValues, held: held)
        case .conflict(let attempt, let copy, let answer):
            nextAnswer.withLock { $0 = answer }
            server.fail(with: ModelConflict(copy: copy), at: attempt)
        case .resolve(let number, let answer):
            if let id = id(of: number) {
                try? launch.queue.resolveConflictNow(id, with: answer.resolution)
            }
        }
    }

    /// The id of mutation `number`, as the app knows it: from its enqueue, or, enqueued by a process that ended
    /// before its enqueue returned, from the queue's list of what is pending (kept, it was restored).
    private func id(of number: Int) -> String? {
        ids.withLock { $0[number] } ?? launch.queue.pending.first { $0.input.number == number }?.id
    }

    /// Enqueues `mutation`, noting the id it was given, or the enqueue's error among the outcomes (unless the
    /// process ended meanwhile: its enqueue never returned).
    private static func enqueue(
        _ mutation: Numbered, on queue: MutationQueue<String, Items, Numbered>, link: ProcessLink,
        ids: Locked<[Int: String]>, outcomes: Locked<[Int: String]>
    ) {
        do {
            let id = try queue.enqueue(mutation)
            ids.withLock { $0[mutation.number] = id }
        } catch {
            guard link.isAlive else { return }
            let reason = if case StoreError.cleared = error { "cleared" } else { "\(error)" }
            // Told how it settled, it must not throw as well.
            outcomes.withLock { outcomes in
                let settled = outcomes[mutation.number].map { "\($0), then enqueue threw" }
                outcomes[mutation.number] = settled ?? "enqueue threw: \(reason)"
            }
        }
    }

    var checkpoint: QueueCheckpoint {
        let last = launch.observer.values.last
        return QueueCheckpoint(
            shown: Shown(value: last?.value, hasPendingChanges: last?.hasPendingChanges ?? false),
            kept: storage.kept.map { "#\($0.input.number)×\($0.attempts)\($0.awaitsResolution ? "?" : "")" },
            pending: launch.queue.pending.map { "#\($0.input.number)" }, sent: sent.withLock { $0 },
            outcomes: outcomes.withLock { $0 }, publishedAtMostOnce: publishedAtMostOnce)
    }

    /// A new process: a new store (its memory level empty) and a new queue over the same storage and disk.
    private static func start(
        clock: TestClock, disk: ModelLevel<Items>, storage: ModelStorage<Numbered>, online: Bool,
        server: LoaderSpy<String>, attempted: Locked<[Numbered]>, sent: Locked<[Int]>,
        outcomes: Locked<[Int: String]>, answers: Locked<ConflictAnswer>, rewritesValues: Bool,
        held: Locked<(number: Int, hold: @Sendable () -> Void)?>
    ) -> Launch {
        let link = ProcessLink()
        let connectivity = ManualConnectivity(isOnline: online)
        let scheduler = TestScheduler()
        let attempts = Locked<[any CancellationToken]>([])
        let store = Store<String, Items>(
            levels: [
                .cache(ModelLevel<Items>(clock: clock), name: "memory"),
                .cache(LinkedLevel(disk, link: link), name: "disk"),
            ],
            fetch: LoaderFamily { _ in LoaderSpy<Items>() }, now: { clock.now })
        let observer = StreamRecorder(store.changes(for: "q"))
        _ = store.read("q", policy: .cacheOnly).load { _ in }  // what the disk holds, shown
        // Every attempt, a creation's or another's, goes to the one server, in order.
        let attempt: @Sendable (Numbered, @escaping LoadCompletion<String>) -> any CancellationToken = {
            item, completion in
            if link.isAlive { sent.withLock { $0.append(item.number) } }
            attempted.withLock { $0.append(item) }
            let token = server.load(completion: completion)
            attempts.withLock { $0.append(token) }
            return token
        }
        let creation = OfflineCreation<Numbered>(
            temporaryID: { item in item.edit.createdID.map { String($0) } },
            replacingIDs: { item, serverID in
                serverID(String(item.edit.named)).flatMap { Int($0) }.map {
                    Numbered(number: item.number, edit: item.edit.naming($0))
                }
            },
            send: { item, _ in AnyLoader<String> { completion in attempt(item, completion) } })
        let rewrite: @Sendable (Items, (String) -> String?) -> Items = { items, serverID in
            Array(Set(items.map { serverID(String($0)).flatMap { Int($0) } ?? $0 })).sorted()
        }
        let queue = try! MutationQueue(
            store: store, storage: LinkedStorage(storage, link: link), connectivity: connectivity,
            retryDelays: .constant(.seconds(5)), scheduler: scheduler, key: { _ in "q" },
            change: { item, value in
                held.withLock { $0?.number == item.number ? $0?.hold : nil }?()
                return item.edit.applied(to: value)
            },
            send: { item, _ in
                AnyLoader<Void> { completion in attempt(item) { completion($0.map { _ in () }) } }
            },
            isRefused: { $0 is Refused },
            conflicts: MutationConflicts(
                serverCopy: { error, _ in (error as? ModelConflict)?.copy },
                resolve: { _ in answers.withLock { $0 }.resolution }),
            creation: creation, replacingIDsInValue: rewritesValues ? rewrite : nil,
            onSettled: { settled in
                let outcome =
                    switch settled.outcome {
                    case .accepted: "accepted"
                    case .refused(MutationConflictError.replacedByServerCopy): "replaced"
                    case .refused: "refused"
                    case .discarded: "discarded"
                    case .cleared: "cleared"
                    case .sentByAnotherProcess: "sent elsewhere"
                    }
                if link.isAlive { outcomes.withLock { $0[settled.input.number] = outcome } }
            })
        return Launch(
            link: link, store: store, queue: queue, observer: observer, connectivity: connectivity,
            scheduler: scheduler,
            attempts: attempts)
    }
}

/// A queue's mutation in a history: its edit, and the number it was enqueued with.
struct Numbered: Hashable, Sendable {
    let number: Int
    let edit: Edit
}

/// Whether a process of a queue's history still runs: once cut, what it writes reaches nothing.
final class ProcessLink: Sendable {
    private let alive = Locked(true)

    var isAlive: Bool { alive.withLock { $0 } }

    func cut() {
        alive.withLock { $0 = false }
    }
}

/// A process's view of the disk level: nothing once the process ended.
final class LinkedLevel: KeyedCache {
    private let level: ModelLevel<Items>
    private let link: ProcessLink

    init(_ level: ModelLevel<Items>, link: ProcessLink) {
        self.level = level
        self.link = link
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<Items>, any Error>) -> Void) {
        guard link.isAlive else { return completion(.failure(CacheMiss.absent)) }
        level.value(for: key, completion: completion)
    }

    func save(_ value: Items, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard link.isAlive else { return completion(.success(())) }
        level.save(value, for: key, completion: completion)
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard link.isAlive else { return completion(.success(())) }
        level.removeValue(for: key, completion: completion)
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard link.isAlive else { return completion(.success(())) }
        level.removeAll(completion: completion)
    }
}

/// A process's view of the mutation storage: nothing once the process ended.
final class LinkedStorage<Input: Sendable>: MutationStorage {
    private let storage: ModelStorage<Input>
    private let link: ProcessLink

    init(_ storage: ModelStorage<Input>, link: ProcessLink) {
        self.storage = storage
        self.link = link
    }

    func loadAll() throws -> [StoredMutation<Input>] { link.isAlive ? try storage.loadAll() : [] }

    func save(_ mutation: StoredMutation<Input>) throws {
        if link.isAlive { try storage.save(mutation) }
    }

    func remove(_ mutation: StoredMutation<Input>) throws {
        if link.isAlive { try storage.remove(mutation) }
    }
}

/// Mutations kept in memory, for a queue's histories: what a restart finds.
final class ModelStorage<Input: Sendable>: MutationStorage {
    private let mutations = Locked<[String: StoredMutation<Input>]>([:])

    var kept: [StoredMutation<Input>] {
        mutations.withLock { $0.values.sorted { $0.sequence < $1.sequence } }
    }

    func loadAll() throws -> [StoredMutation<Input>] { kept }

    func save(_ mutation: StoredMutation<Input>) throws {
        mutations.withLock { $0[mutation.id] = mutation }
    }

    func remove(_ mutation: StoredMutation<Input>) throws {
        mutations.withLock { _ = $0.removeValue(forKey: mutation.id) }
    }
}

extension ModelCheck {
    /// Runs a queue's history: the real queue against ``QueueModel``.
    static func run(_ history: [QueueStep], rewritesValues: Bool = true) -> Disagreement<QueueStep, QueueCheckpoint>? {
        run(history, model: { QueueModel() }, system: { QueueUnderTest(rewritesValues: rewritesValues) })
    }

    /// Fails the test when `history` disagrees with the queue's model, with the value's ids rewritten by the queue
    /// and without.
    static func assertQueueAgrees(_ history: [QueueStep], file: StaticString = #filePath, line: UInt = #line) {
        for rewritesValues in [true, false] {
            if let disagreement = run(history, rewritesValues: rewritesValues) {
                XCTFail("rewriting the value's ids: \(rewritesValues), \(disagreement)", file: file, line: line)
            }
        }
    }

    /// A random queue history of `length` steps from `seed`, made with the model at hand.
    static func queueHistory(seed: UInt64, length: Int) -> [QueueStep] {
        var random = SeededRandom(seed: seed)
        var model = QueueModel()
        var steps: [QueueStep] = []
        while steps.count < length {
            let roll = Int.random(in: 0..<100, using: &random)
            var step: QueueStep
            switch roll {
            case 0..<25:
                let number = Int.random(in: 0..<4, using: &random)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<2: step = .enqueue(.insert(-(model.temporaryIDs.count + 1)))  // an item created offline
                case 2..<4:
                    guard let created = model.temporaryIDs.randomElement(using: &random) else { continue }
                    step = .enqueue(.delete(created))
                default: step = .enqueue(Bool.random(using: &random) ? .insert(number) : .delete(number))
                }
                if case .enqueue(let edit) = step, Int.random(in: 0..<10, using: &random) < 3 {
                    // Something happens while the enqueue's change runs.
                    var after = model
                    after.apply(step)
                    var during: [QueueStep] = [.retryTimerFires, .online(!after.isOnline), .clear, .restart]
                    // The attempt in flight before: the enqueued mutation is sent once the enqueue returns.
                    if let attempt = model.attemptInFlight {
                        during += [
                            .accept(attempt: attempt), .refuse(attempt: attempt), .failForNow(attempt: attempt),
                            .conflict(attempt: attempt, copy: [number], answer: .rebase),
                        ]
                    }
                    // The app knows the enqueued mutation's id once the enqueue returned: another one is discarded.
                    if let pending = after.pendingNumbers.dropLast().randomElement(using: &random) {
                        during.append(.discard(mutation: pending))
                    }
                    if let awaiting = after.awaitingNumbers.randomElement(using: &random) {
                        during.append(.resolve(mutation: awaiting, answer: .takeServerCopy))
                    }
                    step = .enqueueWhile(edit, during: during.randomElement(using: &random)!)
                }
            case 25..<55:
                // The attempt in flight mostly; sometimes a late answer of an earlier one.
                let late = model.attemptsSent > 0 && Int.random(in: 0..<5, using: &random) == 0
                guard
                    let attempt = late ? Int.random(in: 0..<model.attemptsSent, using: &random) : model.attemptInFlight
                else { continue }
                let copy = (0..<Int.random(in: 0..<3, using: &random)).map { _ in Int.random(in: 0..<4, using: &random)
                }
                let answer = [ConflictAnswer.rebase, .takeServerCopy, .ask].randomElement(using: &random)!
                let answers: [QueueStep] = [
                    .accept(attempt: attempt), .accept(attempt: attempt), .refuse(attempt: attempt),
                    .failForNow(attempt: attempt), .conflict(attempt: attempt, copy: copy, answer: answer),
                ]
                step = answers.randomElement(using: &random)!
            case 55..<63: step = .retryTimerFires
            case 63..<78: step = .online(Int.random(in: 0..<3, using: &random) != 0)
            case 78..<84:
                guard let number = model.pendingNumbers.randomElement(using: &random) else { continue }
                step = .discard(mutation: number)
            case 84..<91: step = .clear
            case 91..<95:
                guard let number = model.awaitingNumbers.randomElement(using: &random) else { continue }
                step = .resolve(mutation: number, answer: Bool.random(using: &random) ? .rebase : .takeServerCopy)
            default: step = .restart
            }
            model.apply(step)
            steps.append(step)
        }
        return steps
    }
}
