import Foundation

/// A small, seeded random number generator (SplitMix64): every history is reproducible from its seed, and the
/// package needs no dependency for it.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// The values the modelled store holds: a few numbers, sorted, without repeats. Every change of them inserts or
/// deletes one number, so that applying a change twice is applying it once, as the store asks of changes (a fetch
/// may get a change applied again).
typealias Items = [Int]

/// A change of a key's value.
enum Edit: Hashable, Sendable, CustomStringConvertible {
    /// Adds a number (to an empty list when the key has no value).
    case insert(Int)
    /// Takes a number out (nothing when the key has no value).
    case delete(Int)

    func applied(to value: Items?) -> Items? {
        switch self {
        case .insert(let number): Array(Set((value ?? []) + [number])).sorted()
        case .delete(let number): value.map { $0.filter { $0 != number } }
        }
    }

    var description: String {
        switch self {
        case .insert(let number): ".insert(\(number))"
        case .delete(let number): ".delete(\(number))"
        }
    }
}

/// How a pending optimistic change ends.
enum Settlement: Hashable, Sendable, CustomStringConvertible {
    case accept, refuse, cancel

    var description: String {
        switch self {
        case .accept: ".accept"
        case .refuse: ".refuse"
        case .cancel: ".cancel"
        }
    }
}

/// The read policies a history uses.
enum ModelPolicy: Hashable, Sendable, CustomStringConvertible {
    case cacheFirst
    case cacheFirstYoungerThan(Int)
    case cacheOnly, cacheThenNetwork, networkFirst, networkOnly

    var description: String {
        switch self {
        case .cacheFirst: ".cacheFirst"
        case .cacheFirstYoungerThan(let seconds): ".cacheFirstYoungerThan(\(seconds))"
        case .cacheOnly: ".cacheOnly"
        case .cacheThenNetwork: ".cacheThenNetwork"
        case .networkFirst: ".networkFirst"
        case .networkOnly: ".networkOnly"
        }
    }
}

/// One step of a history: an operation of the store's public API, or something that happens around it (a fetch
/// answering, the clock moving, the levels failing). Steps name what they act on by the order it was made in
/// (the third read, the second mutation): removing steps from a history leaves a valid history, which is what lets a
/// failure shrink.
enum Step: Hashable, Sendable, CustomStringConvertible {
    case write(String, Items)
    case update(String, Edit)
    /// A new optimistic change; its commit waits for a `settle`.
    case mutate(String, Edit)
    case settle(mutation: Int, Settlement)
    case remove(String)
    case clear
    case invalidate(String)
    case invalidateWhere([String])
    case invalidateAll
    case revalidate
    /// A read; its answer is recorded as it comes.
    case read(String, ModelPolicy)
    case refresh(String)
    case observe(String)
    case stopObserving(observer: Int)
    /// The server answers the key's request `request` (in the order they were made).
    case answer(String, request: Int, Items)
    case fail(String, request: Int)
    /// A change of the key runs (`Store.update`) and, while its transform runs, `during` happens (the server answers,
    /// the app writes, removes, invalidates, logs out): as when it comes from another thread. A change asked meanwhile
    /// waits behind the one running; a removal, an invalidation or a clear comes after it in the store's order.
    indirect case updateWhile(String, Edit, during: Step)
    case advanceClock(seconds: Int)
    /// The levels' saves and removals fail (or work again).
    case levelsFail(Bool)
    /// The network can be reached again, or no longer.
    case connectivity(online: Bool)

    var description: String {
        switch self {
        case .write(let key, let items): ".write(\"\(key)\", \(items))"
        case .update(let key, let edit): ".update(\"\(key)\", \(edit))"
        case .mutate(let key, let edit): ".mutate(\"\(key)\", \(edit))"
        case .settle(let mutation, let settlement): ".settle(mutation: \(mutation), \(settlement))"
        case .remove(let key): ".remove(\"\(key)\")"
        case .clear: ".clear"
        case .invalidate(let key): ".invalidate(\"\(key)\")"
        case .invalidateWhere(let keys): ".invalidateWhere([\(keys.map { "\"\($0)\"" }.joined(separator: ", "))])"
        case .invalidateAll: ".invalidateAll"
        case .revalidate: ".revalidate"
        case .read(let key, let policy): ".read(\"\(key)\", \(policy))"
        case .refresh(let key): ".refresh(\"\(key)\")"
        case .observe(let key): ".observe(\"\(key)\")"
        case .stopObserving(let observer): ".stopObserving(observer: \(observer))"
        case .answer(let key, let request, let items): ".answer(\"\(key)\", request: \(request), \(items))"
        case .fail(let key, let request): ".fail(\"\(key)\", request: \(request))"
        case .updateWhile(let key, let edit, let during): ".updateWhile(\"\(key)\", \(edit), during: \(during))"
        case .advanceClock(let seconds): ".advanceClock(seconds: \(seconds))"
        case .levelsFail(let failing): ".levelsFail(\(failing))"
        case .connectivity(let online): ".connectivity(online: \(online))"
        }
    }
}

/// What a history's observers, callers and levels were left with after a step: what the checker compares.
struct Checkpoint: Equatable, CustomStringConvertible {
    /// What each observer was last shown (`nil`: nothing, or a key showing no value), with whether changes were
    /// pending, by observer.
    var observers: [Int: Shown] = [:]
    /// Each read's answers so far, by read.
    var reads: [Int: [Answer]] = [:]
    /// Each mutation's outcome, once it came, by mutation.
    var mutations: [Int: String] = [:]
    /// What each level holds, by level then key.
    var levels: [[String: Items]] = []
    /// How many requests each key made.
    var requests: [String: Int] = [:]

    var description: String {
        """
        observers \(observers.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" })
        reads \(reads.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" })
        mutations \(mutations.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" })
        levels \(levels.map { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } })
        requests \(requests.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        """
    }
}

/// What an observer or a read was shown: a value (or none), and whether optimistic changes were pending.
struct Shown: Hashable, CustomStringConvertible {
    var value: Items?
    var hasPendingChanges: Bool

    var description: String { "\(value.map { "\($0)" } ?? "nil")\(hasPendingChanges ? " (pending)" : "")" }
}

/// A read's answer: what it was shown, or a failure.
enum Answer: Hashable, CustomStringConvertible {
    case shown(Shown, withError: Bool)
    case failed

    var description: String {
        switch self {
        case .shown(let shown, let withError): "\(shown)\(withError ? " + error" : "")"
        case .failed: "failed"
        }
    }
}

extension Step {
    /// Simpler forms of this step, for shrinking: the requests, mutations and observers it names by smaller numbers,
    /// and its values made empty.
    var simpler: [Step] {
        switch self {
        case .answer(let key, let request, let items):
            (request > 0 ? [.answer(key, request: request - 1, items), .answer(key, request: 0, items)] : [])
                + (items.isEmpty ? [] : [.answer(key, request: request, [])])
        case .fail(let key, let request) where request > 0:
            [.fail(key, request: request - 1), .fail(key, request: 0)]
        case .updateWhile(let key, let edit, let during):
            [.update(key, edit), during] + during.simpler.map { .updateWhile(key, edit, during: $0) }
        case .settle(let mutation, let settlement) where mutation > 1:
            [.settle(mutation: mutation - 1, settlement), .settle(mutation: 1, settlement)]
        case .stopObserving(let observer) where observer > 1:
            [.stopObserving(observer: observer - 1), .stopObserving(observer: 1)]
        case .write(let key, let items) where !items.isEmpty: [.write(key, [])]
        case .invalidateWhere(let keys) where keys.count == 1: [.invalidate(keys[0])]
        case .invalidateAll: ModelCheck.keys.map { .invalidate($0) }
        default: []
        }
    }
}
