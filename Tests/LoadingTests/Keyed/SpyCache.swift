import Foundation
import Loading

/// A synchronous keyed cache that counts its reads and saves.
final class SpyCache: KeyedCache {
    private let state = Locked<(values: [String: CachedValue<String>], reads: Int, saves: Int)>(([:], 0, 0))
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    var values: [String: String] {
        get { state.withLock { $0.values.mapValues(\.value) } }
        set { state.withLock { $0.values = newValue.mapValues { CachedValue($0, savedAt: now()) } } }
    }

    var reads: Int { state.withLock { $0.reads } }
    var saves: Int { state.withLock { $0.saves } }

    /// While set, reads read at once but deliver only on `releaseReads()`.
    var holdReads: Bool {
        get { held.withLock { $0.isHolding } }
        set { held.withLock { $0.isHolding = newValue } }
    }
    private let held = Locked<(isHolding: Bool, deliveries: [@Sendable () -> Void])>((false, []))

    func releaseReads() {
        let deliveries = held.withLock { held in
            held.isHolding = false
            defer { held.deliveries = [] }
            return held.deliveries
        }
        for delivery in deliveries { delivery() }
    }

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        let value = state.withLock { state -> CachedValue<String>? in
            state.reads += 1
            return state.values[key]
        }
        let deliver: @Sendable () -> Void = { completion(value.map { .success($0) } ?? .failure(CacheMiss.absent)) }
        let isHeld = held.withLock { held -> Bool in
            if held.isHolding { held.deliveries.append(deliver) }
            return held.isHolding
        }
        if !isHeld { deliver() }
    }

    /// While set, saves are done on `releaseSaves()`, in order.
    var holdSaves: Bool {
        get { heldSaves.withLock { $0.isHolding } }
        set { heldSaves.withLock { $0.isHolding = newValue } }
    }
    private let heldSaves = Locked<(isHolding: Bool, saves: [@Sendable () -> Void])>((false, []))

    /// The saves held now.
    var heldSaveCount: Int { heldSaves.withLock { $0.saves.count } }

    func releaseSaves() {
        let saves = heldSaves.withLock { held in
            held.isHolding = false
            defer { held.saves = [] }
            return held.saves
        }
        for save in saves { save() }
    }

    /// While set, saves and removals fail with it, changing nothing.
    var writeError: (any Error)? {
        get { failure.withLock { $0 } }
        set { failure.withLock { $0 = newValue } }
    }
    private let failure = Locked<(any Error)?>(nil)

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let save: @Sendable () -> Void = { [state, now, failure] in
            if let error = failure.withLock({ $0 }) { return completion(.failure(error)) }
            state.withLock { state in
                state.saves += 1
                state.values[key] = CachedValue(value, savedAt: now())
            }
            completion(.success(()))
        }
        let isHeld = heldSaves.withLock { held -> Bool in
            if held.isHolding { held.saves.append(save) }
            return held.isHolding
        }
        if !isHeld { save() }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        if let error = writeError { return completion(.failure(error)) }
        state.withLock { _ = $0.values.removeValue(forKey: key) }
        completion(.success(()))
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        state.withLock { $0.values = [:] }
        completion(.success(()))
    }
}
