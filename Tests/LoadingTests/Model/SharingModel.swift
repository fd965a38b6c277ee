import Dispatch
import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// A step of a history of two stores standing for two processes over one shared disk level and its journal (an app
/// and its widget), in one process: the journal is read as a step of the history, not on a timer, so a history is
/// reproducible from its seed.
enum SharingStep: Hashable, Sendable, CustomStringConvertible {
    /// Store `store` (0 or 1) writes `value` to the shared key.
    case write(store: Int, value: Int)
    /// Store `store` removes the shared key.
    case remove(store: Int)
    /// Store `store` is cleared (a logout): it empties every level, the shared one too; the other learns it.
    case clear(store: Int)
    /// Store `store`'s operations on the shared level wait from now (a slow disk), until it lets them land.
    case hold(store: Int)
    /// Store `store`'s held operations land, in order; its later ones go straight through.
    case release(store: Int)
    /// Store `store` reads the key from its levels (nothing fetched), as a screen opening would.
    case read(store: Int)
    /// Store `store` reads the journal: what the other changed since.
    case learn(store: Int)
    /// Every held save lands, and both stores learn until neither changes: where the history is compared.
    case settle
    /// Store `store` updates the key to `value`, its transform held (the first time it runs) while `during` happens.
    indirect case updateWhile(store: Int, value: Int, during: SharingStep)

    /// The store this step happens in, if one.
    var store: Int? {
        switch self {
        case .write(let store, _), .remove(let store), .clear(let store), .hold(let store), .release(let store),
            .read(let store), .learn(let store), .updateWhile(let store, _, _):
            store
        case .settle: nil
        }
    }

    /// Simpler forms of this step, for shrinking: an update while something happens, as its two steps apart (the
    /// values are only told apart).
    var simpler: [SharingStep] {
        guard case .updateWhile(let store, let value, let during) = self else { return [] }
        return [.write(store: store, value: value), during]
    }

    var description: String {
        switch self {
        case .write(let store, let value): ".write(store: \(store), value: \(value))"
        case .remove(let store): ".remove(store: \(store))"
        case .clear(let store): ".clear(store: \(store))"
        case .hold(let store): ".hold(store: \(store))"
        case .release(let store): ".release(store: \(store))"
        case .read(let store): ".read(store: \(store))"
        case .learn(let store): ".learn(store: \(store))"
        case .settle: ".settle"
        case .updateWhile(let store, let value, let during):
            ".updateWhile(store: \(store), value: \(value), during: \(during))"
        }
    }
}

/// What a sharing history left once settled: what each store shows of the key, and what the shared level holds.
/// Between settles nothing is compared (`nil`): each store may show its own change until it learns the other's.
struct SharingCheckpoint: Equatable, CustomStringConvertible {
    var settled: [String]?

    var description: String {
        settled.map { "store 0 shows \($0[0]), store 1 shows \($0[1]), the shared level holds \($0[2])" }
            ?? "(not settled)"
    }
}

/// What processes sharing a level promise: once every save landed and each learned the other's changes, both show
/// the change asked last (in the history's order, whichever save landed last), and the shared level holds it.
struct SharingModel: ModelCheck.System {
    /// The value of the change asked last: `nil` after a removal, or before any change.
    private var last: Int?
    private var settled = false
    /// Whether each store has a logout of the other to learn still (recorded once its emptying of the level landed).
    private var logoutToLearn = [false, false]
    /// Whether each store's operations on the shared level are held, and whether a logout of it waits for them.
    private var holding = [false, false]
    private var logoutUnrecorded = [false, false]

    mutating func apply(_ step: SharingStep) {
        settled = false
        switch step {
        case .write(_, let value): last = value
        case .remove: last = nil
        case .clear(let store):
            last = nil
            if holding[store] { logoutUnrecorded[store] = true } else { logoutToLearn[1 - store] = true }
        case .hold(let store): holding[store] = true
        case .release(let store):
            holding[store] = false
            if exchange(&logoutUnrecorded[store], with: false) { logoutToLearn[1 - store] = true }
        case .read: break
        case .learn(let store): logoutToLearn[store] = false
        case .settle:
            settled = true
            (logoutToLearn, holding, logoutUnrecorded) = ([false, false], [false, false], [false, false])
        case .updateWhile(let store, let value, let during):
            // The store learns the other's logout while its update runs: as its own logout would, it drops the
            // update (whose transform was given the old user's value).
            if during == .learn(store: store), logoutToLearn[store] { return apply(during) }
            // The update is made when its transform returns: what this store is asked meanwhile waits behind it,
            // what the other store does meanwhile comes first.
            if during.store == store {
                last = value
                apply(during)
            } else {
                apply(during)
                last = value
            }
        }
    }

    var checkpoint: SharingCheckpoint {
        let shown = last.map { "v\($0)" } ?? "nothing"
        return SharingCheckpoint(settled: settled ? [shown, shown, shown] : nil)
    }
}

/// The real stores a sharing history runs on: each with a memory level and the shared disk level (one `DiskCache`),
/// whose writes a step can hold, and its own journal over one file, read only when a step says so (its timer is an
/// hour).
final class SharingUnderTest: ModelCheck.System {
    private struct Process {
        let store: Store<String, String>
        let shared: DiskCache<String, String>
        let gate: SaveGate
    }

    private let folder: URL
    private let processes: [Process]
    private var settled: [String]?
    /// Each store's logouts that may not have emptied the levels yet.
    private var logouts: [[DispatchSemaphore]] = [[], []]

    init() {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("sharing-model-\(UUID().uuidString)")
        let folder = folder
        try! FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // One disk cache for both: its queue lands their writes in the order they were issued (held ones once
        // released), so that a history is reproducible from its seed.
        let shared = DiskCache<String, String>(directory: folder.appendingPathComponent("shared"))
        processes = (0..<2).map { _ in
            let gate = SaveGate()
            let store = Store(
                levels: [
                    .cache(MemoryCache<String, String>(), name: "memory"),
                    .cache(GatedCache(base: shared, gate: gate), name: "shared"),
                ],
                fetch: LoaderFamily { (_: String) in
                    AnyLoader<String> { completion in
                        completion(.failure(URLError(.notConnectedToInternet)))
                        return AnyCancellationToken {}
                    }
                },
                sharing: try! .journal(
                    at: folder.appendingPathComponent("changes.journal"), sharedLevel: "shared",
                    polling: .seconds(3_600)))
            return Process(store: store, shared: shared, gate: gate)
        }
    }

    deinit {
        for process in processes { process.gate.release() }
        try? FileManager.default.removeItem(at: folder)
    }

    func apply(_ step: SharingStep) {
        run(step, waiting: true)
    }

    /// Runs `step`; a logout is waited for until the levels are emptied and the other store can learn it, when
    /// `waiting` and unless the store's level operations are held (not while an update runs: it may wait for it).
    private func run(_ step: SharingStep, waiting: Bool) {
        settled = nil
        switch step {
        case .write(let store, let value): processes[store].store.write("v\(value)", for: "k")
        case .remove(let store): processes[store].store.remove("k")
        case .clear(let store):
            let ended = DispatchSemaphore(value: 0)
            processes[store].store.clear { ended.signal() }
            logouts[store].append(ended)
            if waiting { waitForLogouts() }
        case .hold(let store): processes[store].gate.hold()
        case .release(let store):
            processes[store].gate.release()
            if waiting { waitForLogouts() }
        case .read(let store):
            // Answered once what the read waits for lands: a held save, or the level's queue.
            _ = processes[store].store.read("k", policy: .cacheOnly).load { _ in }
        case .learn(let store): processes[store].store.learnOtherProcessesChanges()
        case .settle: settle()
        case .updateWhile(let store, let value, let during):
            // The update reads the key from the levels first, then runs its transform on the level's queue: held
            // there the first time. A read asked once it ran waits for the update to be made (placed in the
            // processes' order) before the history goes on. (A store whose level operations are held would run the
            // transform only once they are let go of: the histories made do not update there, and a shrunk one that
            // does goes on without waiting, rather than never.)
            let (updating, waits) = (processes[store].store, !processes[store].gate.isHolding)
            ModelCheck.whileAChangeRuns { hold in
                let ran = DispatchSemaphore(value: 0)
                updating.update("k") { _ in
                    hold()
                    defer { ran.signal() }
                    return "v\(value)"
                }
                guard waits else { return }
                ran.wait()
                Self.wait { done in _ = updating.read("k", policy: .cacheOnly).load { _ in done() } }
            } during: {
                run(during, waiting: false)
            }
            waitForLogouts()  // made or let go of meanwhile, once the update was made
        }
    }

    var checkpoint: SharingCheckpoint { SharingCheckpoint(settled: settled) }

    /// Waits until the logouts of each store whose level operations are not held emptied the levels (and recorded
    /// it for the other store to learn).
    private func waitForLogouts() {
        for store in processes.indices where !processes[store].gate.isHolding {
            let made = exchange(&logouts[store], with: [])
            for ended in made where ended.wait(timeout: .now() + .watchdog) == .timedOut { XCTFail("a logout hung") }
        }
    }

    /// Lets every save land and each store learn the other's changes, a few rounds (a store whose own change is newer
    /// saves it again, which the other then learns), each store reading the key as its saves landed (before it
    /// learned what the other changed), then reads what each shows and what the level holds.
    private func settle() {
        for _ in 0..<3 {
            for process in processes {
                process.gate.release()
                Self.wait { done in process.store.flush(completion: done) }
            }
            waitForLogouts()
            for process in processes {
                Self.wait { done in _ = process.store.read("k", policy: .cacheOnly).load { _ in done() } }
            }
            for process in processes {
                process.store.learnOtherProcessesChanges()
                // The store's read of the shared level goes first on its disk cache's queue: this one ends after it.
                Self.wait { done in process.shared.value(for: "k") { _ in done() } }
            }
        }
        let shown = processes.map { process in
            Self.answer { done in
                _ = process.store.read("k", policy: .cacheOnly).load { done((try? $0.get())?.value ?? "nothing") }
            }
        }
        let level = Self.answer { done in
            processes[0].shared.value(for: "k") { done((try? $0.get())?.value ?? "nothing") }
        }
        settled = shown + [level]
    }

    private static func wait(_ start: (@escaping @Sendable () -> Void) -> Void) {
        let done = DispatchSemaphore(value: 0)
        start { done.signal() }
        if done.wait(timeout: .now() + .watchdog) == .timedOut { XCTFail("a store did not settle") }
    }

    private static func answer(_ start: (@escaping @Sendable (String) -> Void) -> Void) -> String {
        let value = Locked("(no answer)")
        wait { done in
            start { answer in
                value.withLock { $0 = answer }
                done()
            }
        }
        return value.withLock { $0 }
    }
}

/// Holds a store's operations on the shared level (a slow disk) until released.
private final class SaveGate: Sendable {
    private let state = Locked<(holding: Bool, saves: [@Sendable () -> Void])>((false, []))

    func hold() { state.withLock { $0.holding = true } }

    var isHolding: Bool { state.withLock { $0.holding } }

    /// Runs `operation` now, or once released while holding.
    func pass(_ operation: @escaping @Sendable () -> Void) {
        let held = state.withLock { state -> Bool in
            guard state.holding else { return false }
            state.saves.append(operation)
            return true
        }
        if !held { operation() }
    }

    /// Lets the held saves land, in order, and the later ones straight through.
    func release() {
        let saves = state.withLock { state -> [@Sendable () -> Void] in
            state.holding = false
            return exchange(&state.saves, with: [])
        }
        for save in saves { save() }
    }
}

/// A shared level whose operations pass its gate in the order they were issued, as a slow disk takes them: a read
/// answers with what the writes issued before it left, as a shared level must.
private struct GatedCache: KeyedCache {
    let base: DiskCache<String, String>
    let gate: SaveGate

    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        gate.pass { [base] in base.value(for: key, completion: completion) }
    }

    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        gate.pass { [base] in base.save(value, for: key, completion: completion) }
    }

    func save(
        _ value: String, for key: String, savedAt: Date,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        gate.pass { [base] in base.save(value, for: key, savedAt: savedAt, completion: completion) }
    }

    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        gate.pass { [base] in base.removeValue(for: key, completion: completion) }
    }

    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        gate.pass { [base] in base.removeAll(completion: completion) }
    }
}

extension ModelCheck {
    /// Runs a sharing history: two real stores over one shared level against ``SharingModel``.
    static func run(_ history: [SharingStep]) -> Disagreement<SharingStep, SharingCheckpoint>? {
        run(history, model: { SharingModel() }, system: { SharingUnderTest() })
    }

    /// Fails the test when `history` disagrees with the sharing model.
    static func assertSharingAgrees(_ history: [SharingStep], file: StaticString = #filePath, line: UInt = #line) {
        if let disagreement = run(history) { XCTFail("\(disagreement)", file: file, line: line) }
    }

    /// A random sharing history of `length` steps from `seed`, ending settled.
    static func sharingHistory(seed: UInt64, length: Int) -> [SharingStep] {
        var random = SeededRandom(seed: seed)
        var steps: [SharingStep] = []
        var value = 0
        var holding = [false, false]
        while steps.count < length - 1 {
            let store = Int.random(in: 0..<2, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<34:
                value += 1
                steps.append(.write(store: store, value: value))
            case 34..<42: steps.append(.remove(store: store))
            case 42..<46: steps.append(.clear(store: store))
            case 46..<58:
                holding[store] = true
                steps.append(.hold(store: store))
            case 58..<66:
                holding[store] = false
                steps.append(.release(store: store))
            case 66..<80: steps.append(.read(store: store))
            case 80..<88: steps.append(.learn(store: store))
            case 88..<93 where !holding[store]:
                // Something happens while one store's update runs (the other's operations may be held).
                value += 2
                let (written, otherStore) = (value - 1, 1 - store)
                let during: [SharingStep] = [
                    .write(store: otherStore, value: written), .remove(store: otherStore), .learn(store: otherStore),
                    .clear(store: otherStore), .write(store: store, value: written), .remove(store: store),
                    .learn(store: store), .clear(store: store), .hold(store: store), .release(store: store),
                    .read(store: otherStore),
                ]
                let happens = during.randomElement(using: &random)!
                if happens == .hold(store: store) { holding[store] = true }
                steps.append(.updateWhile(store: store, value: value, during: happens))
            case 88..<93: continue
            default:
                holding = [false, false]
                steps.append(.settle)
            }
        }
        steps.append(.settle)
        return steps
    }
}
