import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport

/// The store's operations run from several threads at once, and checked for linearizability: the answers must be
/// those of some sequential order of the operations (``StoreModel`` run in that order) that keeps every operation
/// after the ones that ended before it started, and that order must leave the levels and the observers as the store
/// left them. The network answers every request at once with the server's value of the key.
enum LinearizabilityCheck {
    /// An operation of a thread, and what it returned.
    struct Operation: CustomStringConvertible {
        let thread: Int
        let step: ConcurrentStep
        /// When it started and ended, on one counter all threads share.
        var start = 0
        var end = 0
        var result: String = ""

        var description: String { "thread \(thread): \(step) → \(result) [\(start)–\(end)]" }
    }

    /// The operations a concurrent history is made of: those that complete before they return (the levels and the
    /// network answer at once), or whose answer the thread waits for.
    enum ConcurrentStep: Hashable, Sendable, CustomStringConvertible {
        case write(String, Items)
        case update(String, Edit)
        /// An optimistic change whose commit answers at once, accepted or refused.
        case mutate(String, Edit, accepted: Bool)
        case remove(String)
        case clear
        case invalidate(String)
        case read(String, ModelPolicy)
        /// The network can be reached again, or no longer (the store answers from its cache while it cannot).
        case connectivity(online: Bool)

        var description: String {
            switch self {
            case .write(let key, let items): "write(\(key), \(items))"
            case .update(let key, let edit): "update(\(key), \(edit))"
            case .mutate(let key, let edit, let accepted): "mutate(\(key), \(edit), accepted: \(accepted))"
            case .remove(let key): "remove(\(key))"
            case .clear: "clear"
            case .invalidate(let key): "invalidate(\(key))"
            case .read(let key, let policy): "read(\(key), \(policy))"
            case .connectivity(let online): "connectivity(online: \(online))"
            }
        }
    }

    /// What the store was left with once every thread was done: the levels, and what each key's observer was shown
    /// last.
    struct Final: Equatable, CustomStringConvertible {
        var levels: [[String: Items]]
        var shown: [String: Shown]

        var description: String { "levels \(levels), shown \(shown.sorted { $0.key < $1.key })" }
    }

    static let server: @Sendable (String) -> Items = { key in key == "a" ? [9] : [8] }

    // MARK: Running

    /// Runs each thread's steps on its own thread, all at once, on a new store whose keys are observed throughout.
    /// When `slow`, the levels answer a moment later on queues of their own, and the network on another thread; what
    /// the store was left with is read once both are idle. The store's `network` mode is by default `.always`, or
    /// `.answersFromCache` for a history that switches the connectivity.
    static func run(
        _ threads: [[ConcurrentStep]], slow: Bool = false, network mode: ModelNetwork? = nil
    ) -> (operations: [Operation], final: Final) {
        let connectivity = ManualConnectivity()
        let network: NetworkMode =
            switch mode ?? self.network(of: threads) {
            case .always: .always
            case .answersFromCache: .answersFromCache(connectivity)
            case .waitsForNetwork: .waitsForNetwork(connectivity)
            }
        let clock = TestClock()
        let levels = [ModelLevel<Items>(clock: clock, slow: slow), ModelLevel<Items>(clock: clock, slow: slow)]
        let requests = DispatchGroup()
        let server = server
        let store = Store<String, Items>(
            levels: [.cache(levels[0], name: "memory"), .cache(levels[1], name: "disk")],
            fetch: LoaderFamily { key in
                AnyLoader<Items> { completion in
                    guard slow else {
                        completion(.success(server(key)))
                        return AnyCancellationToken {}
                    }
                    requests.enter()
                    DispatchQueue.global().async {
                        jitter(upTo: 50_000)
                        completion(.success(server(key)))
                        requests.leave()
                    }
                    return AnyCancellationToken {}
                }
            }, network: network, now: { clock.now })
        let observers = ModelCheck.keys.map { ($0, StreamRecorder(store.changes(for: $0))) }
        let ticks = Locked(0)
        let tick: @Sendable () -> Int = {
            ticks.withLock {
                $0 += 1
                return $0
            }
        }
        let recorded = Locked<[Operation]>([])
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for (thread, steps) in threads.enumerated() {
            group.enter()
            Thread.detachNewThread {
                start.wait()
                for step in steps {
                    var operation = Operation(thread: thread, step: step)
                    operation.start = tick()
                    operation.result = perform(step, on: store, connectivity: connectivity)
                    operation.end = tick()
                    recorded.withLock { $0.append(operation) }
                }
                group.leave()
            }
        }
        for _ in threads { start.signal() }
        group.wait()
        repeat {
            for level in levels { level.waitUntilIdle() }
            requests.wait()
        } while levels.contains { !$0.isIdle }
        let shown = Dictionary(
            uniqueKeysWithValues: observers.map { key, recorder in
                let last = recorder.values.last
                return (key, Shown(value: last?.value, hasPendingChanges: last?.hasPendingChanges ?? false))
            })
        withExtendedLifetime(observers) {}
        return (recorded.withLock { $0 }, Final(levels: levels.map(\.contents), shown: shown))
    }

    /// The network mode of a history's store by default: one that switches the connectivity answers from its cache
    /// while offline.
    static func network(of threads: [[ConcurrentStep]]) -> ModelNetwork {
        threads.joined().contains { if case .connectivity = $0 { true } else { false } } ? .answersFromCache : .always
    }

    /// Performs `step` and waits for its answer; what it returned, as the model says it.
    private static func perform(
        _ step: ConcurrentStep, on store: Store<String, Items>, connectivity: ManualConnectivity
    ) -> String {
        switch step {
        case .connectivity(let online): connectivity.setOnline(online)
        case .write(let key, let items): store.write(items, for: key)
        case .update(let key, let edit): store.update(key) { edit.applied(to: $0) }
        case .remove(let key): store.remove(key)
        case .clear: store.clear()
        case .invalidate(let key): store.invalidate(key)
        case .mutate(let key, let edit, let accepted):
            let outcome = Locked("none")
            let done = DispatchSemaphore(value: 0)
            let change: @Sendable (Items?) -> Items? = { edit.applied(to: $0) }
            let commit = AnyLoader<Void> { completion in
                completion(accepted ? .success(()) : .failure(TestError.model))
                return AnyCancellationToken {}
            }
            store.mutate(key, change, commit: commit) { result in
                let text: String
                switch result {
                case .success: text = "accepted"
                case .failure(let error as StoreError) where error == .cleared: text = "cleared"
                case .failure: text = "refused"
                }
                outcome.withLock { $0 = text }
                done.signal()
            }
            done.wait()
            return outcome.withLock { $0 }
        case .read(let key, let policy):
            let answer = Locked<Answer?>(nil)
            let done = DispatchSemaphore(value: 0)
            _ = store.read(key, policy: policy.storePolicy).load { result in
                answer.withLock { $0 = Answer(result) }
                done.signal()
            }
            done.wait()
            return answer.withLock { $0 }.map { "\($0)" } ?? "none"
        }
        return ""
    }

    // MARK: Checking

    /// A moment of an operation at which it takes effect. A change has one. An optimistic change has two (it is
    /// shown, then settled); an invalidation two (the key is marked stale, then its refetch goes out, or is owed
    /// when a fetch sent before is in flight); a read four (it begins; it reads the levels or sends its request, and
    /// a removal or a clear since it began overtakes it; the network answers, and a removal or a clear before that
    /// discards what it brings; it answers, falling back on what the key shows when its request failed or was
    /// overtaken), all within the operation's interval. The answer to an invalidation's refetch is not
    /// waited for: it lands at any moment after the refetch went out (see ``Made/unanswered``), and so does an owed
    /// refetch, which goes out at any moment after the fetch before it ended.
    private struct Event {
        let operation: Operation
        /// Which of the operation's moments.
        let part: Int
        let isLast: Bool
    }

    /// What a thread's operation in progress made in the model, by thread: the mutation or the read its last moment
    /// settles or answers, and the request it sent (that its network moment answers).
    private struct Made: Hashable {
        var item: [Int: Int] = [:]
        var request: [Int: Int] = [:]
        /// The refetches invalidations sent that the network has not answered yet, by key: each is answered at a
        /// moment of its own, before the history ends.
        var unanswered: Set<Refetch> = []
    }

    /// A refetch an invalidation sent.
    private struct Refetch: Hashable {
        let key: String
        let request: Int
    }

    /// A point of the search: how far each thread went, what its operation in progress made, and the model then.
    private struct Point: Hashable {
        let next: [Int: Int]
        let made: Made
        let model: StoreModel
    }

    /// Why no sequential order explains a history: the longest order of operations the model agreed with, and what
    /// came next.
    struct NotLinearizable: Error, CustomStringConvertible {
        let closest: [Operation]
        let mismatch: String

        var description: String {
            "the closest order the model agrees with:\n" + closest.map(\.description).joined(separator: "\n")
                + "\nthen " + mismatch
        }
    }

    /// What the search for a linearization found.
    enum Verdict {
        /// An order the model agrees with.
        case linearizable([Operation])
        /// None: why.
        case notLinearizable(NotLinearizable)
        /// Neither, within the points it may search (a rare history whose moments interleave in too many ways).
        case undecided
    }

    /// A sequential order of `operations`' moments that the model agrees with (answers and final state), or why there
    /// is none: the operations were not linearizable; undecided past `budget` points searched. The store's `network`
    /// mode is by default the one ``run(_:slow:network:)`` takes.
    static func linearization(
        of operations: [Operation], final: Final, network: ModelNetwork? = nil, budget: Int = 100_000
    ) -> Verdict {
        let byThread = Dictionary(grouping: operations, by: \.thread).mapValues { operations in
            operations.sorted { $0.start < $1.start }.flatMap { operation -> [Event] in
                let moments =
                    switch operation.step {
                    case .read: 4
                    case .mutate, .invalidate: 2
                    default: 1
                    }
                return (0..<moments).map { Event(operation: operation, part: $0, isLast: $0 == moments - 1) }
            }
        }
        var next = byThread.mapValues { _ in 0 }
        var order: [Operation] = []
        var found: [Operation]?
        var points = 0
        // Points searched already, from which no order was found: interleavings that lead to the same point are
        // searched once.
        var visited = Set<Point>()
        var closest: (order: [Operation], mismatch: String) = ([], "")

        func search(_ model: StoreModel, made: Made) {
            guard found == nil, points <= budget, visited.insert(Point(next: next, made: made, model: model)).inserted
            else { return }
            points += 1
            let candidates = byThread.compactMap { thread, events in
                next[thread]! < events.count ? events[next[thread]!] : nil
            }
            for refetch in made.unanswered {
                var model = model
                var made = made
                made.unanswered.remove(refetch)
                model.answerAtOnce(refetch.key, request: refetch.request, with: server(refetch.key))
                search(model, made: made)
            }
            for (key, fetch) in model.sendsDue {
                var model = model
                var made = made
                if let request = model.sendOrFail(key, fetch: fetch) {
                    made.unanswered.insert(Refetch(key: key, request: request))
                }
                search(model, made: made)
            }
            for (key, fetch) in model.failuresDue {
                var model = model
                model.failOffline(key, fetch: fetch)
                search(model, made: made)
            }
            for key in model.refetchesDue {
                var model = model
                var made = made
                let requests = model.requestsMade(for: key)
                model.beginOwedRefetch(key)
                if model.requestsMade(for: key) > requests {
                    made.unanswered.insert(Refetch(key: key, request: requests))
                }
                search(model, made: made)
            }
            guard !candidates.isEmpty else {
                if made.unanswered.isEmpty, model.refetchesDue.isEmpty, model.sendsDue.isEmpty,
                    model.failuresDue.isEmpty, model.final == final
                {
                    found = order
                }
                if order.count >= closest.order.count {
                    closest = (order, "the model leaves \(model.final)")
                }
                return
            }
            // A moment may come next when no operation left ended before its operation started.
            let earliestEnd = candidates.map(\.operation.end).min()!
            for event in candidates where event.operation.start < earliestEnd {
                var model = model
                var made = made
                let result = take(event, in: &model, made: &made)
                guard !event.isLast || result == event.operation.result else {
                    if order.count >= closest.order.count {
                        closest = (order, "\(event.operation) where the model answers \(result)")
                    }
                    continue
                }
                let thread = event.operation.thread
                next[thread]! += 1
                if event.isLast { order.append(event.operation) }
                search(model, made: made)
                if event.isLast { order.removeLast() }
                next[thread]! -= 1
            }
        }

        var model = StoreModel(
            network: network ?? self.network(of: byThread.values.map { $0.map(\.operation.step) }))
        model.defersOwedRefetches = true
        // Every request goes out at a moment of its own, and is answered at one of its own; a read whose request
        // failed or was overtaken answers at a moment of its own too.
        model.defersSends = true
        for key in ModelCheck.keys { model.apply(.observe(key)) }
        search(model, made: Made())
        if let found { return .linearizable(found) }
        if points > budget { return .undecided }
        return .notLinearizable(NotLinearizable(closest: closest.order, mismatch: closest.mismatch))
    }

    /// Takes `event` in `model`; what its operation returned, at its last moment.
    private static func take(_ event: Event, in model: inout StoreModel, made: inout Made) -> String {
        let thread = event.operation.thread
        switch (event.operation.step, event.part) {
        case (.mutate(let key, let edit, _), 0):
            model.apply(.mutate(key, edit))
            made.item[thread] = model.mutationsMade
        case (.mutate(_, _, let accepted), _):
            model.apply(.settle(mutation: made.item[thread]!, accepted ? .accept : .refuse))
            return model.mutations[made.item[thread]!] ?? "none"
        case (.read(let key, _), 0):
            // The read begins: a removal or a clear from now on overtakes it.
            made.item[thread] = model.removals(of: key)
        case (.read(let key, let policy), 1):
            let requests = model.requestsMade(for: key)
            if model.removals(of: key) != made.item[thread]! {
                model.readOvertaken(key)
            } else {
                model.apply(.read(key, policy))
            }
            made.item[thread] = model.readsMade
            made.request[thread] = model.requestsMade(for: key) > requests ? requests : nil
        case (.read(let key, _), 2):
            answerRequestSent(by: thread, of: key, in: &model, made: &made)
        case (.read, _):
            model.fallBack(read: made.item[thread]!)
            return model.reads[made.item[thread]!]?.first.map { "\($0)" } ?? "none"
        case (.invalidate(let key), 0):
            made.item[thread] = model.markStale([key]).isEmpty ? 0 : 1
        case (.invalidate(let key), _):
            guard made.item[thread] == 1 else { break }  // not observed: nothing to refetch
            let requests = model.requestsMade(for: key)
            model.refetch(key)
            if model.requestsMade(for: key) > requests { made.unanswered.insert(Refetch(key: key, request: requests)) }
        case (.write(let key, let items), _): model.apply(.write(key, items))
        case (.update(let key, let edit), _): model.apply(.update(key, edit))
        case (.remove(let key), _): model.apply(.remove(key))
        case (.clear, _): model.apply(.clear)
        case (.connectivity(let online), _): model.apply(.connectivity(online: online))
        }
        return ""
    }

    /// The network answers the request the thread's operation sent, if it sent one (a read that joined another's
    /// request is answered when that one is).
    private static func answerRequestSent(by thread: Int, of key: String, in model: inout StoreModel, made: inout Made)
    {
        guard let request = made.request.removeValue(forKey: thread) else { return }
        model.answerAtOnce(key, request: request, with: server(key))
    }

    /// The network mode of the history of `seed`: one history in three answers from its cache while offline, one in
    /// six waits for the network, the others always fetch.
    static func network(seed: UInt64) -> ModelNetwork {
        seed % 3 == 0 ? .answersFromCache : seed % 6 == 1 ? .waitsForNetwork : .always
    }

    /// Random threads of operations from `seed`: `threads` threads of `length` operations each, for a store in the
    /// `network` mode. A store that answers from its cache has its connectivity switched off and on by any thread.
    /// One that waits for the network has it switched by the first thread alone, which begins by taking the network
    /// away, reads only from the cache (it must not wait) and ends by bringing the network back, so that every read
    /// waiting on another thread ends.
    static func threads(
        seed: UInt64, threads: Int, length: Int, network: ModelNetwork = .always
    ) -> [[ConcurrentStep]] {
        var random = SeededRandom(seed: seed)
        return (0..<threads).map { thread in
            let switches = network == .answersFromCache || (network == .waitsForNetwork && thread == 0)
            let steps = (0..<length).map { _ -> ConcurrentStep in
                let key = ModelCheck.keys.randomElement(using: &random)!
                let number = Int.random(in: 0..<4, using: &random)
                let edit: Edit = Bool.random(using: &random) ? .insert(number) : .delete(number)
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<15: return .write(key, [number])
                case 15..<30: return .update(key, edit)
                case 30..<42: return .mutate(key, edit, accepted: Bool.random(using: &random))
                case 42..<48: return .remove(key)
                case 48..<51: return .clear
                case 51..<58: return .invalidate(key)
                case 58..<64 where switches: return .connectivity(online: Bool.random(using: &random))
                default:
                    let policies: [ModelPolicy] = [.cacheFirst, .cacheOnly, .networkFirst, .networkOnly]
                    let policy = policies.randomElement(using: &random)!
                    return .read(key, network == .waitsForNetwork && thread == 0 ? .cacheOnly : policy)
                }
            }
            guard network == .waitsForNetwork, thread == 0 else { return steps }
            return [.connectivity(online: false)] + steps + [.connectivity(online: true)]
        }
    }
}

extension StoreModel {
    /// What the levels and the observers (one per key) were left with.
    var final: LinearizabilityCheck.Final {
        let checkpoint = checkpoint
        var shown: [String: Shown] = [:]
        for (observer, key) in ModelCheck.keys.enumerated() { shown[key] = checkpoint.observers[observer + 1] }
        return LinearizabilityCheck.Final(levels: checkpoint.levels, shown: shown)
    }
}

extension ModelPolicy {
    var storePolicy: ReadPolicy {
        switch self {
        case .cacheFirst: .cacheFirst
        case .cacheFirstYoungerThan(let seconds): .cacheFirst(maxAge: .seconds(seconds))
        case .cacheOnly: .cacheOnly
        case .cacheThenNetwork: .cacheThenNetwork
        case .networkFirst: .networkFirst
        case .networkOnly: .networkOnly
        }
    }
}
