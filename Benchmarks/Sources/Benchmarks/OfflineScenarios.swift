import Foundation
import Loading

/// 19. Appending a page to a list: `PagedStore.loadNextPage` (a page source answering at once, pages of 20, at most
/// 10 kept, saved to a memory level) against pages appended to an array under a lock.
func pageAppendScenario(appends: Int) -> Scenario {
    let pageSize = 20
    let page: @Sendable (Int) -> Page<Int, Int> = { number in
        Page(items: Array(number * pageSize..<(number + 1) * pageSize), nextCursor: number + 1)
    }
    let sum = Tally()
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let lock = NSLock()
    let handWritten = Variant(name: "pages in an array under a lock") { count in
        var pages: [Page<Int, Int>] = []
        for number in 0..<count {
            let loaded = page(number)
            lock.lock()
            pages.append(loaded)
            if pages.count > 10 { pages.removeFirst() }
            lock.unlock()
            sum.value &+= loaded.items[0] / pageSize
        }
        return checksum()
    }
    let paged = Variant(name: "PagedStore.loadNextPage") { count in
        let store = PagedStore(
            levels: [.cache(MemoryCache<Int, PagedList<Int, Int>>(), name: "memory")], maxPages: 10
        ) { (_: Int, cursor: Int?) in
            AnyLoader<Page<Int, Int>> { completion in
                completion(.success(page(cursor ?? 0)))
                return NoToken()
            }
        }
        for _ in 0..<count {
            _ = store.nextPage(of: 0).load { result in
                let last = (try? result.get())?.value?.pages.last?.page.items.first ?? 0
                sum.value &+= last / pageSize
            }
        }
        return checksum()
    }
    return Scenario(
        title: "19. Page append: loadNextPage, pages of 20, at most 10 kept",
        unit: "appends", operations: appends, reference: "pages in an array under a lock",
        variants: [handWritten, paged],
        expectedChecksum: { count in (0..<count).reduce(0, &+) },
        note: "a page source answering at once: what the list's own bookkeeping costs")
}

/// 20. Replaying queued mutations: a `MutationQueue` made over a storage that holds `mutations`, sending them in
/// order to a server answering at once, each confirmed in the store; against a loop applying them to a locked list.
func mutationReplayScenario(mutations: Int) -> Scenario {
    let sum = Tally()
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let lock = NSLock()
    let handWritten = Variant(name: "a loop over the queued changes, under a lock") { count in
        var list: [Int] = []
        var queued = (0..<count).map { $0 }
        while !queued.isEmpty {
            let next = queued.removeFirst()
            lock.lock()
            list.append(next)
            lock.unlock()
            sum.value &+= next
        }
        return checksum() &+ list.count &- count
    }
    let queue = Variant(name: "MutationQueue replay") { count in
        let storage = MemoryMutationStorage(count: count)
        let replayed = try? makeReplayQueue(storage: storage, connectivity: nil, sum: sum)
        precondition(replayed?.isMutating == false && storage.isEmpty, "every mutation was replayed")
        return checksum()
    }
    return Scenario(
        title: "20. Replaying queued mutations, answered at once, storage in memory",
        unit: "mutations", operations: mutations, reference: "a loop over the queued changes, under a lock",
        variants: [handWritten, queue],
        expectedChecksum: { count in (0..<count).reduce(0, &+) },
        note: "in order, one at a time, each confirmed in the store before the next is sent")
}

/// 20b. The same replay through `FileMutationStorage`, the mutations first enqueued offline (a synced file each):
/// what durability costs per mutation, on this machine's disk. Times only.
func durableMutationScenario(mutations: Int, folder: URL) -> Scenario {
    let sum = Tally()
    let run = Locked(0)
    /// Enqueues `count` mutations offline into `storage`, then replays them online.
    func enqueueThenReplay(_ count: Int, into storage: some MutationStorage<Int>) -> Int {
        let connectivity = ManualConnectivity(isOnline: false)
        let queue = try! makeReplayQueue(storage: storage, connectivity: connectivity, sum: sum)
        for item in 0..<count { try! queue.enqueue(item) }
        connectivity.setOnline(true)
        precondition(!queue.isMutating, "every mutation was replayed")
        defer { sum.value = 0 }
        return sum.value
    }
    let durable = Variant(name: "enqueue offline, then replay, FileMutationStorage") { count in
        let number = run.withLock { value -> Int in
            value += 1
            return value
        }
        let directory = folder.appendingPathComponent("outbox-\(number)")
        defer { try? FileManager.default.removeItem(at: directory) }
        return enqueueThenReplay(count, into: FileMutationStorage<Int>(directory: directory))
    }
    let memory = Variant(name: "enqueue offline, then replay, storage in memory") { count in
        enqueueThenReplay(count, into: MemoryMutationStorage(count: 0))
    }
    return Scenario(
        title: "20b. Queued mutations on disk: enqueue offline, then replay",
        unit: "mutations", operations: mutations, reference: "enqueue offline, then replay, storage in memory",
        variants: [memory, durable],
        expectedChecksum: { count in (0..<count).reduce(0, &+) },
        note: "each enqueue writes and syncs a file before it returns; each settled mutation removes it",
        countedOperations: 0)
}

/// A queue over a store holding a list, whose server answers at once and adds each mutation's input to `sum`.
func makeReplayQueue(
    storage: some MutationStorage<Int>, connectivity: ManualConnectivity?, sum: Tally
) throws -> MutationQueue<Int, [Int], Int> {
    let store = Store<Int, [Int]>(
        levels: [], fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)).map { [$0] } })
    store.write([], for: 0)
    return try MutationQueue(
        store: store, storage: storage, connectivity: connectivity, key: { _ in 0 },
        change: { item, list in (list ?? []) + [item] },
        send: { item, _ in
            AnyLoader<Void> { completion in
                sum.value &+= item
                completion(.success(()))
                return NoToken()
            }
        },
        isRefused: { _ in false })
}

/// Mutations kept in memory: the queue's own cost, without a disk. Concrete on purpose (see the growth scenarios'
/// generic `MemoryStorage`): a generic storage class adds its unspecialized witnesses to the counted replays.
final class MemoryMutationStorage: MutationStorage {
    private let kept: Locked<[Int: StoredMutation<Int>]>

    init(count: Int) {
        kept = Locked(
            Dictionary(
                uniqueKeysWithValues: (0..<count).map {
                    ($0, StoredMutation(id: "m\($0)", sequence: $0, input: $0, createdAt: Date(), attempts: 0))
                }))
    }

    var isEmpty: Bool { kept.withLock { $0.isEmpty } }

    func loadAll() throws -> [StoredMutation<Int>] {
        kept.withLock { $0.values.sorted { $0.sequence < $1.sequence } }
    }

    func save(_ mutation: StoredMutation<Int>) throws {
        kept.withLock { $0[mutation.sequence] = mutation }
    }

    func remove(_ mutation: StoredMutation<Int>) throws {
        kept.withLock { _ = $0.removeValue(forKey: mutation.sequence) }
    }
}
