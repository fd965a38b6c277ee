import Foundation
import Loading

/// 21. How the cost of one operation grows with the work around it: mutations enqueued while a screen observes their
/// key, then replayed; pages appended (or prepended) one by one to an uncapped list; many callers joining and leaving
/// one shared load, fetch, key's turn or subject; values waiting for their save in order. Each at 1,000, 10,000 and
/// 100,000 operations, storage in memory (so that disk syncs do not hide the library's own cost), beside a
/// hand-written equivalent. Times, not counts: 100,000 operations under callgrind would take minutes. The gate
/// (`--growth-gate`) holds what matters and survives a noisy machine: the time per operation at 100,000 at most 3x
/// the time at 1,000 (a cost growing with the square would be 100x), and 10,000 of each workload within a second.
func growthReport(sizes: [Int], gates: Bool) -> (lines: [String], passed: Bool) {
    var lines = [
        "", "21. Growth: time per operation as the work grows (release build, storage in memory)",
        "  " + pad("workload", 58) + sizes.map { pad(Report.count($0), 14) }.joined() + "growth",
    ]
    var passed = true
    for workload in growthWorkloads() + sharedWorkGrowthWorkloads() {
        var perOperation: [Double] = []
        for size in sizes where size <= workload.maxSize {
            // The smallest size is noisy: the best of three runs.
            let runs = size == sizes.first ? 3 : 1
            perOperation.append((0..<runs).map { _ in workload.run(size) / Double(size) }.min()!)
        }
        let growth = perOperation.last! / perOperation.first!
        let skipped = Array(repeating: pad("-", 14), count: sizes.count - perOperation.count)
        lines.append(
            "  " + pad(workload.name, 58) + perOperation.map { pad(Report.time($0), 14) }.joined()
                + skipped.joined() + String(format: "%.2fx", growth))
        guard gates else { continue }
        if workload.holdsGrowth, growth > 3 {
            passed = false
            lines.append("  ✗ \(workload.name): grows \(String(format: "%.1f", growth))x from the smallest size")
        }
        if workload.holdsTime, let index = sizes.firstIndex(of: 10_000), perOperation[index] * 10_000 > 1 {
            passed = false
            lines.append("  ✗ \(workload.name): 10,000 take \(Report.time(perOperation[index] * 10_000)) (> 1 s)")
        }
    }
    if gates { lines.append(passed ? "  ✓ growth gate: linear, and 10,000 within a second" : "Growth gate failed.") }
    return (lines, passed)
}

private struct GrowthWorkload {
    let name: String
    /// Whether the gate holds its growth (the hand-written baselines are shown, not held, and a change that copies
    /// the list costs the list's length by itself).
    let holdsGrowth: Bool
    /// Whether the gate holds 10,000 of it within a second.
    let holdsTime: Bool
    /// The largest size it runs at (a workload whose cost grows by design is shown, not waited for).
    let maxSize: Int
    /// Runs `size` operations and returns the seconds they took (set-up excluded).
    let run: (_ size: Int) -> Double

    init(
        name: String, holdsGrowth: Bool, holdsTime: Bool? = nil, maxSize: Int = .max,
        run: @escaping (_ size: Int) -> Double
    ) {
        self.name = name
        self.holdsGrowth = holdsGrowth
        self.holdsTime = holdsTime ?? holdsGrowth
        self.maxSize = maxSize
        self.run = run
    }
}

private func growthWorkloads() -> [GrowthWorkload] {
    [
        GrowthWorkload(name: "a list under a lock, observed (hand-written)", holdsGrowth: false) { size in
            let lock = NSLock()
            var list: [Int] = []
            var shown = 0
            return seconds {
                for item in 0..<size {
                    lock.lock()
                    list.append(item)
                    lock.unlock()
                    shown = list.count  // what an observer is told
                }
                precondition(shown == size)
            }
        },
        GrowthWorkload(name: "MutationQueue.enqueue, key observed (a counter)", holdsGrowth: true) { size in
            let queue = ObservedQueue(counting: true)
            return seconds { for item in 0..<size { try! queue.queue.enqueue(item) } }
        },
        GrowthWorkload(name: "MutationQueue replay, key observed (a counter)", holdsGrowth: true) { size in
            let queue = ObservedQueue(counting: true)
            for item in 0..<size { try! queue.queue.enqueue(item) }
            return seconds {
                queue.connectivity.setOnline(true)
                precondition(!queue.queue.isMutating, "every mutation was replayed")
            }
        },
        GrowthWorkload(
            name: "enqueue + replay, observed (the change copies a list)", holdsGrowth: false, holdsTime: true
        ) { size in
            let queue = ObservedQueue(counting: false)
            return seconds {
                for item in 0..<size { try! queue.queue.enqueue(item) }
                queue.connectivity.setOnline(true)
                precondition(queue.shownCount == size, "every item is shown")
            }
        },
        // Told how the shown value names its items, each creation's answer rewrites what its key shows.
        GrowthWorkload(name: "created offline + edited, replayed (the shown value rewritten)", holdsGrowth: true) {
            CreatingQueue.secondsToReplay($0, rewritingShown: true)
        },
        // Not told, each creation's answer applies the changes pending on its key again: its cost grows with them,
        // as the changes after a refused one do.
        GrowthWorkload(
            name: "created offline + edited, replayed (the changes shown again)", holdsGrowth: false, maxSize: 10_000
        ) { CreatingQueue.secondsToReplay($0, rewritingShown: false) },
        GrowthWorkload(name: "pages appended to an array, locked (hand-written)", holdsGrowth: false) { size in
            let lock = NSLock()
            var pages: [Page<Int, Int>] = []
            return seconds {
                for number in 0..<size {
                    lock.lock()
                    pages.append(Page(items: Array(number * 20..<(number + 1) * 20), nextCursor: number + 1))
                    lock.unlock()
                }
            }
        },
        GrowthWorkload(name: "PagedStore.loadNextPage, uncapped, pages of 20", holdsGrowth: true) { size in
            let store = PagedStore(levels: [.cache(MemoryCache<Int, PagedList<Int, Int>>(), name: "memory")]) {
                (_: Int, cursor: Int?) in
                AnyLoader<Page<Int, Int>> { completion in
                    let number = cursor ?? 0
                    completion(.success(Page(items: Array(number * 20..<(number + 1) * 20), nextCursor: number + 1)))
                    return NoToken()
                }
            }
            return seconds { for _ in 0..<size { store.nextPage(of: 0).load { _ in } } }
        },
        GrowthWorkload(name: "PagedStore.loadPreviousPage, uncapped, pages of 20", holdsGrowth: true) { size in
            let store = PagedStore(levels: [.cache(MemoryCache<Int, PagedList<Int, Int>>(), name: "memory")]) {
                (_: Int, cursor: Int?) in
                AnyLoader<Page<Int, Int>> { completion in
                    let number = cursor ?? 0
                    let items = Array(number * 20..<(number + 1) * 20)
                    completion(.success(Page(items: items, nextCursor: nil, previousCursor: number - 1)))
                    return NoToken()
                }
            }
            return seconds { for _ in 0..<size { store.previousPage(of: 0).load { _ in } } }
        },
    ]
}

/// Many callers sharing one piece of work (a load, a fetch, a key's turn, a subject), each joining or leaving: the
/// cost of one stays flat however many share it.
private func sharedWorkGrowthWorkloads() -> [GrowthWorkload] {
    [
        GrowthWorkload(name: "coalesced family: callers of one load, then its answer", holdsGrowth: true) { size in
            let upstream = HeldLoad<Int>()
            let family = LoaderFamily { (_: Int) in upstream }.coalesced()
            let answered = Locked(0)
            return seconds {
                for _ in 0..<size { _ = family[0].load { _ in answered.withLock { $0 += 1 } } }
                upstream.answer(.success(1))
                precondition(answered.withLock { $0 } == size, "every caller answered")
            }
        },
        GrowthWorkload(name: "coalesced family: callers of one load, each leaving", holdsGrowth: true) { size in
            let upstream = HeldLoad<Int>()
            let family = LoaderFamily { (_: Int) in upstream }.coalesced()
            return seconds {
                let tokens = (0..<size).map { _ in family[0].load { _ in } }
                for token in tokens { token.cancel() }
                precondition(upstream.isCancelled, "the last caller out cancelled the load")
            }
        },
        GrowthWorkload(name: "Store.read: readers of one fetch, each leaving", holdsGrowth: true) { size in
            let upstream = HeldLoad<Int>()
            let store = Store<Int, Int>(levels: [], fetch: LoaderFamily { _ in upstream })
            return seconds {
                let tokens = (0..<size).map { _ in store.read(0).load { _ in } }
                for token in tokens { token.cancel() }
                precondition(upstream.isCancelled, "the last reader out cancelled the fetch")
            }
        },
        GrowthWorkload(name: "Store.update: changes waiting for a key's level read", holdsGrowth: true) { size in
            let level = HeldLevel()
            let store = Store<Int, Int>(
                levels: [.cache(level, name: "held")],
                fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)) })
            return seconds {
                for _ in 0..<size { store.update(0) { ($0 ?? 0) + 1 } }
                level.answer()
                precondition(store.state(for: 0).value == size, "every change applied")
            }
        },
        GrowthWorkload(name: "caching(.failLoad): values waiting behind a slow save", holdsGrowth: true) { size in
            let cache = FirstSaveHeldCache()
            let subject = StreamSubject<Int, any Error>()
            let passed = Locked(0)
            let saved = subject.stream.caching(to: cache, policy: .failLoad)
            let subscription = saved.sink { _ in
            } receiveValue: { _ in
                passed.withLock { $0 += 1 }
            }
            defer { subscription.cancel() }
            return seconds {
                for value in 0..<size { subject.send(value) }
                cache.completeFirstSave()
                precondition(passed.withLock { $0 } == size, "every value passed once saved")
            }
        },
        GrowthWorkload(name: "StreamSubject: subscribers, each cancelling", holdsGrowth: true) { size in
            let subject = StreamSubject<Int, Never>()
            return seconds {
                let subscriptions = (0..<size).map { _ in subject.stream.sink { _ in } }
                for subscription in subscriptions { subscription.cancel() }
            }
        },
    ]
}

/// A load that answers when told, and knows whether it was cancelled.
private final class HeldLoad<Output: Sendable>: Loader {
    private let state = Locked<(completion: LoadCompletion<Output>?, isCancelled: Bool)>((nil, false))

    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        state.withLock { $0.completion = completion }
        return AnyCancellationToken { [state] in state.withLock { $0.isCancelled = true } }
    }

    func answer(_ result: Result<Output, any Error>) {
        state.withLock { $0.completion }?(result)
    }
}

/// A cache whose first save completes when told, and every later save within its call.
private final class FirstSaveHeldCache: Cache {
    private let held = Locked<(@Sendable (Result<Void, any Error>) -> Void)?>(nil)
    private let saves = Locked(0)

    func save(_ value: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let isFirst = saves.withLock { saves in
            saves += 1
            return saves == 1
        }
        guard isFirst else { return completion(.success(())) }
        held.withLock { $0 = completion }
    }

    func completeFirstSave() {
        held.withLock { $0.take() }?(.success(()))
    }
}

/// A level holding nothing, whose reads answer when told.
private final class HeldLevel: KeyedCache {
    private let reads = Locked<[@Sendable (Result<CachedValue<Int>, any Error>) -> Void]>([])

    func value(for key: Int, completion: @escaping @Sendable (Result<CachedValue<Int>, any Error>) -> Void) {
        reads.withLock { $0.append(completion) }
    }

    func save(_ value: Int, for key: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeValue(for key: Int, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    /// Answers the reads asked so far: nothing held.
    func answer() {
        let waiting = reads.withLock { reads in
            defer { reads = [] }
            return reads
        }
        for read in waiting { read(.failure(CacheMiss.absent)) }
    }
}

/// A queue over a store whose key a screen observes, offline until told, its server answering at once.
private final class ObservedQueue: Sendable {
    let connectivity = ManualConnectivity(isOnline: false)
    let queue: MutationQueue<Int, [Int], Int>
    private let shown = Locked(0)
    private let subscription: StreamSubscription

    var shownCount: Int { shown.withLock { $0 } }

    /// `counting`: the key's value is a running total (one element), so that the change itself costs nothing;
    /// otherwise a list that each mutation appends to.
    init(counting: Bool) {
        let store = Store<Int, [Int]>(
            levels: [], fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)).map { [$0] } })
        store.write([], for: 0)
        let shown = shown
        subscription = store.changes(for: 0).sink { response in shown.withLock { $0 = response.value?.count ?? 0 } }
        queue = try! MutationQueue(
            store: store, storage: MemoryMutationStorage(count: 0), connectivity: connectivity, key: { _ in 0 },
            change: { item, list in counting ? [(list?.first ?? 0) &+ item] : (list ?? []) + [item] },
            send: { _, _ in
                AnyLoader<Void> { completion in
                    completion(.success(()))
                    return NoToken()
                }
            },
            isRefused: { _ in false })
    }
}

/// A queue of items created offline and their edits over a store whose key a screen observes (a count of items),
/// offline until told; its server answers at once, a creation with the item's server id.
private final class CreatingQueue: Sendable {
    enum Change: Sendable {
        case add(String)
        case edit(String)

        func replacingIDs(_ serverID: (String) -> String?) -> Change? {
            switch self {
            case .add(let id): serverID(id).map { .add($0) }
            case .edit(let id): serverID(id).map { .edit($0) }
            }
        }
    }

    let connectivity = ManualConnectivity(isOnline: false)
    let queue: MutationQueue<Int, [Int], Change>
    private let subscription: StreamSubscription

    /// The seconds a queue takes to replay `size / 2` items created offline, each edited once after its creation
    /// (`add`, `edit`, `add`, `edit`…), enqueued while offline.
    static func secondsToReplay(_ size: Int, rewritingShown: Bool) -> Double {
        let queue = CreatingQueue(rewritingShown: rewritingShown)
        for item in 0..<size / 2 {
            try! queue.queue.enqueue(.add("local-\(item)"))
            try! queue.queue.enqueue(.edit("local-\(item)"))
        }
        return seconds {
            queue.connectivity.setOnline(true)
            precondition(!queue.queue.isMutating, "every mutation was replayed")
        }
    }

    /// With `rewritingShown`, the queue is told that the shown value (a count) names no item.
    init(rewritingShown: Bool) {
        let store = Store<Int, [Int]>(
            levels: [], fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)).map { [$0] } })
        store.write([0], for: 0)
        subscription = store.changes(for: 0).sink { _ in }
        let answered: @Sendable () -> AnyLoader<Void> = {
            AnyLoader<Void> { completion in
                completion(.success(()))
                return NoToken()
            }
        }
        let created = Locked(0)
        let namesNoItem: @Sendable ([Int], (String) -> String?) -> [Int] = { list, _ in list }
        queue = try! MutationQueue(
            store: store, storage: MemoryStorage<Change>(), connectivity: connectivity, key: { _ in 0 },
            change: { change, list in
                if case .add = change { [(list?.first ?? 0) + 1] } else { list }
            },
            send: { _, _ in answered() },
            isRefused: { _ in false },
            creation: OfflineCreation(
                temporaryID: { change in if case .add(let id) = change { id } else { nil } },
                replacingIDs: { change, serverID in change.replacingIDs(serverID) },
                send: { _, _ in
                    AnyLoader<String> { completion in
                        let number = created.withLock { count in
                            count += 1
                            return count
                        }
                        completion(.success("s\(number)"))
                        return NoToken()
                    }
                }),
            replacingIDsInValue: rewritingShown ? namesNoItem : nil)
    }
}

/// Mutations of any input kept in memory: the queue's own cost, without a disk. Not merged with the offline
/// scenarios' `MemoryMutationStorage`: that one stays concrete (`Int` inputs), because a generic storage class makes
/// the counted replays call its unspecialized witnesses (CI's gate measured +24% instructions and twice the
/// allocations).
private final class MemoryStorage<Input: Sendable>: MutationStorage {
    private let kept = Locked<[Int: StoredMutation<Input>]>([:])

    func loadAll() throws -> [StoredMutation<Input>] {
        kept.withLock { $0.values.sorted { $0.sequence < $1.sequence } }
    }

    func save(_ mutation: StoredMutation<Input>) throws {
        kept.withLock { $0[mutation.sequence] = mutation }
    }

    func remove(_ mutation: StoredMutation<Input>) throws {
        kept.withLock { _ = $0.removeValue(forKey: mutation.sequence) }
    }
}

private func seconds(_ work: () -> Void) -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    work()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}
