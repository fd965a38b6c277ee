import Foundation
import Loading

/// 23. The offline queue's paths with `queued` mutations already waiting, each beside what an app would write by
/// hand: an enqueue while offline (storage in memory, the key observed by a screen) and a mutation replayed (restored
/// from the storage, sent to a server answering at once, confirmed in the store) with `queued` more behind it.
/// Counted at two sizes, a cost that grows with the queue shows as a figure that moves between them.
func queueSizeScenario(label: String, queued: Int, operations: Int) -> Scenario {
    // Every variant adds `input % 100` per mutation (and nothing else) through the same opaque sink.
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 % 100 }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let lock = NSLock()

    let enqueueByHand = Variant(name: "a mutation saved in a locked Dictionary, its key's total updated") { count in
        var saved = Dictionary(uniqueKeysWithValues: (0..<queued).map { ($0, $0) })
        var total = (0..<queued).reduce(0, &+)
        for item in queued..<queued + count {
            lock.lock()
            saved[item] = item
            total &+= item
            lock.unlock()
            add(item - queued)
        }
        withExtendedLifetime((saved, total)) {}
        return checksum()
    }
    let enqueue = Variant(name: "MutationQueue.enqueue, offline, key observed") { count in
        let store = countingStore()
        let shown = Tally()
        let screen = store.changes(for: 0).sink { response in shown.value = response.value ?? 0 }
        let queue = try! MutationQueue(
            store: store, storage: MemoryMutationStorage(count: queued),
            connectivity: ManualConnectivity(isOnline: false),
            key: { _ in 0 }, change: { item, total in (total ?? 0) &+ item },
            send: { _, _ in AnyLoader<Void> { _ in NoToken() } }, isRefused: { _ in false })
        for item in queued..<queued + count {
            try! queue.enqueue(item)
            add(item - queued)
        }
        screen.cancel()
        return checksum()
    }
    let replayByHand = Variant(name: "a queued mutation sent, applied and removed, under a lock") { count in
        // The mutations to send first, then the ones that stay queued behind them.
        var saved = Dictionary(uniqueKeysWithValues: (0..<count + queued).map { ($0, $0) })
        let order = saved.keys.sorted()
        var total = 0
        for item in order.prefix(count) {
            add(item)  // sent
            lock.lock()
            total &+= item
            saved[item] = nil
            lock.unlock()
        }
        withExtendedLifetime((saved, total)) {}
        return checksum()
    }
    let replay = Variant(name: "MutationQueue replay, per mutation, restored from storage") { count in
        let store = countingStore()
        let sent = Tally()
        // The server answers the first `count` mutations at once and keeps the next waiting: `queued` stay behind.
        let queue = try! MutationQueue(
            store: store, storage: MemoryMutationStorage(count: count + queued), connectivity: nil,
            key: { _ in 0 }, change: { item, total in (total ?? 0) &+ item },
            send: { item, _ in
                AnyLoader<Void> { completion in
                    guard sent.value < count else { return NoToken() }
                    sent.value += 1
                    add(item)
                    completion(.success(()))
                    return NoToken()
                }
            },
            isRefused: { _ in false })
        precondition(queue.isMutating && sent.value == count, "the first mutations were replayed, the rest wait")
        return checksum()
    }
    return Scenario(
        title: "23\(label). Offline mutations with \(queued) queued",
        unit: "mutations", operations: operations,
        reference: "a mutation saved in a locked Dictionary, its key's total updated",
        variants: [enqueueByHand, enqueue, replayByHand, replay],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        note: "each queue variant beside its hand-written equivalent above it; storage in memory")
}

/// A store whose one key holds a running total: a change costs nothing of its own.
private func countingStore() -> Store<Int, Int> {
    let store = Store<Int, Int>(levels: [], fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)) })
    store.write(0, for: 0)
    return store
}
