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

/// 25. Items created offline and edited (`add`, `edit`, `add`, `edit`…, on one key a screen observes), replayed with
/// `queued` more waiting behind, restored from storage, the server answering each creation with the item's server id
/// at once: per mutation, beside what an app would write by hand. The queue told how the shown value names its items
/// (`replacingIDsInValue:`, here a running count, which names none) rewrites what its key shows on each creation's
/// answer; the queue not told applies the changes pending on the key again, so its figure grows with `queued` (900k
/// instructions per mutation at 250 queued, 12.4M at 10,000, counted on 2026-12-02).
func creationReplayScenario(label: String, queued: Int, operations: Int) -> Scenario {
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 % 100 }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let lock = NSLock()

    let byHand = Variant(name: "a creation's server id recorded, its item's edit rewritten, under a lock") { count in
        var saved = Dictionary(uniqueKeysWithValues: (0..<count + queued).map { ($0, $0) })
        var serverIDs: [Int: Int] = [:]
        var total = 0
        for sequence in 0..<count {
            add(sequence)  // sent
            lock.lock()
            if sequence % 2 == 0 {
                serverIDs[sequence / 2] = sequence
                total &+= 1
            } else {
                total &+= serverIDs[sequence / 2] == nil ? 0 : 1
            }
            saved[sequence] = nil
            lock.unlock()
        }
        withExtendedLifetime((saved, total)) {}
        return checksum()
    }
    func replay(rewritingShown: Bool) -> Variant {
        let name = rewritingShown ? "the shown value rewritten" : "the pending changes applied again"
        return Variant(name: "MutationQueue replay of creations, \(name)") { count in
            replayCreations(count, queued: queued, rewritingShown: rewritingShown, sending: add)
            return checksum()
        }
    }
    return Scenario(
        title: "25\(label). Items created offline and edited, replayed with \(queued) queued",
        unit: "mutations", operations: operations,
        reference: "a creation's server id recorded, its item's edit rewritten, under a lock",
        // Applying the pending changes again at the larger size would take the counts minutes: shown at the smaller.
        variants: [byHand, replay(rewritingShown: true)] + (queued <= 1_000 ? [replay(rewritingShown: false)] : []),
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        note: "storage in memory; the key a screen observes holds a count of items")
}

/// Replays the first `count` of `count + queued` creations and edits restored from storage (see scenario 25).
private func replayCreations(
    _ count: Int, queued: Int, rewritingShown: Bool, sending add: @escaping @Sendable (Int) -> Void
) {
    let store = Store<Int, Int>(
        levels: [], fetch: LoaderFamily { _ in ImmediateLoader(result: .success(0)) })
    store.write(0, for: 0)
    let screen = store.changes(for: 0).sink { _ in }
    let sent = Tally()
    // The server answers the first `count` mutations at once and keeps the next waiting: `queued` stay behind.
    let answers: @Sendable (CreatedItemChange) -> Bool = { change in
        guard sent.value < count else { return false }
        sent.value += 1
        add(change.sequence)
        return true
    }
    let edit: @Sendable (CreatedItemChange, String) -> AnyLoader<Void> = { change, _ in
        AnyLoader<Void> { completion in
            if answers(change) { completion(.success(())) }
            return NoToken()
        }
    }
    let create: @Sendable (CreatedItemChange, String) -> AnyLoader<String> = { change, _ in
        AnyLoader<String> { completion in
            if answers(change) { completion(.success("s\(change.sequence)")) }
            return NoToken()
        }
    }
    let apply: @Sendable (CreatedItemChange, Int?) -> Int? = { change, total in
        change.isCreation ? (total ?? 0) &+ 1 : total
    }
    // A count names no item: rewritten, it stays as it is.
    let namesNoItem: @Sendable (Int, (String) -> String?) -> Int = { total, _ in total }
    let queue = try! MutationQueue(
        store: store, storage: CreationStorage(count: count + queued), connectivity: nil,
        key: { _ in 0 }, change: apply, send: edit, isRefused: { _ in false },
        creation: OfflineCreation(
            temporaryID: { change in change.isCreation ? change.id : nil },
            replacingIDs: { change, serverID in change.replacingIDs(serverID) }, send: create),
        replacingIDsInValue: rewritingShown ? namesNoItem : nil)
    precondition(queue.isMutating && sent.value == count, "the first mutations were replayed, the rest wait")
    screen.cancel()
    precondition(queue.isMutating && sent.value == count, "the first mutations were replayed, the rest wait")
    screen.cancel()
}

/// A creation (`add`) or an edit of the item created offline as `local-N`, with its place in the queue.
struct CreatedItemChange: Sendable {
    let isCreation: Bool
    let id: String
    let sequence: Int

    func replacingIDs(_ serverID: (String) -> String?) -> CreatedItemChange? {
        serverID(id).map { CreatedItemChange(isCreation: isCreation, id: $0, sequence: sequence) }
    }
}

/// Creations and edits kept in memory, `add` then `edit` of each item. Concrete, as `MemoryMutationStorage` is.
final class CreationStorage: MutationStorage {
    private let kept: Locked<[Int: StoredMutation<CreatedItemChange>]>

    init(count: Int) {
        kept = Locked(
            Dictionary(
                uniqueKeysWithValues: (0..<count).map { sequence in
                    let change = CreatedItemChange(
                        isCreation: sequence % 2 == 0, id: "local-\(sequence / 2)", sequence: sequence)
                    let stored = StoredMutation(
                        id: "m\(sequence)", sequence: sequence, input: change, createdAt: Date(), attempts: 0)
                    return (sequence, stored)
                }))
    }

    func loadAll() throws -> [StoredMutation<CreatedItemChange>] {
        kept.withLock { $0.values.sorted { $0.sequence < $1.sequence } }
    }

    func save(_ mutation: StoredMutation<CreatedItemChange>) throws {
        kept.withLock { $0[mutation.sequence] = mutation }
    }

    func remove(_ mutation: StoredMutation<CreatedItemChange>) throws {
        kept.withLock { _ = $0.removeValue(forKey: mutation.sequence) }
    }
}
