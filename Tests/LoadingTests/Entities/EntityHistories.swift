import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// A step of a history of three stores sharing entities: lists of members, one member's detail, and paged feeds of
/// members. Requests are named by their place among those waiting, in the order they were sent.
enum EntityStep: Hashable, Sendable, CustomStringConvertible {
    case refreshList(Int)
    case refreshDetail(Int)
    /// The server answers the request waiting at `request` with its members as they are now.
    case answer(request: Int)
    case fail(request: Int)
    /// The server's copy of a member gets a new version.
    case serverEdits(Int)
    /// The server's list `key` takes its next shape: its two members, then the first one in two places, the first
    /// alone, the second in two places (a list's members change; a list may hold one member twice).
    case serverRegroups(Int)
    /// A live update of a member (`SharedEntities.update`), to a version newer than any before.
    case liveUpdate(Int)
    /// An optimistic change of a member (`SharedEntities.mutate`), accepted or refused at once.
    case mutate(Int, accepted: Bool)
    /// A list written with the server's copies of its members as they are now.
    case writeList(Int)
    case removeList(Int)
    case removeDetail(Int)
    case loadNextPage(feed: Int)
    case refreshFeed(Int)
    /// A logout of the lists' store.
    case clearLists
    /// A change of list `key` runs (it keeps the list as it is) while the server answers the request waiting at
    /// `answering` and member `liveUpdate` gets a live update: what comes for the key meanwhile waits behind the change.
    case changeList(Int, answering: Int, liveUpdate: Int)

    var description: String {
        switch self {
        case .refreshList(let key): ".refreshList(\(key))"
        case .refreshDetail(let key): ".refreshDetail(\(key))"
        case .answer(let request): ".answer(request: \(request))"
        case .fail(let request): ".fail(request: \(request))"
        case .serverEdits(let id): ".serverEdits(\(id))"
        case .serverRegroups(let key): ".serverRegroups(\(key))"
        case .liveUpdate(let id): ".liveUpdate(\(id))"
        case .mutate(let id, let accepted): ".mutate(\(id), accepted: \(accepted))"
        case .writeList(let key): ".writeList(\(key))"
        case .removeList(let key): ".removeList(\(key))"
        case .removeDetail(let key): ".removeDetail(\(key))"
        case .loadNextPage(let feed): ".loadNextPage(feed: \(feed))"
        case .refreshFeed(let key): ".refreshFeed(\(key))"
        case .clearLists: ".clearLists"
        case .changeList(let key, let request, let id): ".changeList(\(key), answering: \(request), liveUpdate: \(id))"
        }
    }

    /// Simpler forms of this step, for shrinking: the request it names by a smaller place.
    var simpler: [EntityStep] {
        switch self {
        case .answer(let request) where request > 0: [.answer(request: request - 1), .answer(request: 0)]
        case .fail(let request) where request > 0: [.fail(request: request - 1), .fail(request: 0)]
        case .changeList(let key, let request, let id) where request > 0:
            [.changeList(key, answering: request - 1, liveUpdate: id), .changeList(key, answering: 0, liveUpdate: id)]
        default: []
        }
    }

    /// Whether the step only races fetches: a refresh, an answer, a failure, or the server's edit.
    var racesFetches: Bool {
        switch self {
        case .refreshList, .refreshDetail, .answer, .fail, .serverEdits, .serverRegroups: true
        default: false
        }
    }
}

/// What an entity history left: what disagreed, if anything (every key holding a member shows the copy the entities
/// hold; in a history that only races fetches, that copy is the one the rule names).
struct EntityCheckpoint: Equatable, CustomStringConvertible {
    var disagreement: String?

    var description: String { disagreement ?? "every copy agrees" }
}

/// What sharing entities promises, as an invariant: nothing disagrees, whatever the history.
struct EntityAgreement: ModelCheck.System {
    mutating func apply(_ step: EntityStep) {}

    var checkpoint: EntityCheckpoint { EntityCheckpoint() }
}

/// The real stores an entity history runs on, over memory levels, with a server whose requests wait until the
/// history answers them. It checks the invariant after every step: every key holding a member shows the copy the
/// entities hold; when `checksRule` (a history that only races fetches), that copy is the one the rule names: the
/// copy learned last, an answer overtaken by a newer fetch of the same thing not counting (or, with `byVersion`, the
/// newest learned).
final class EntityHistoryUnderTest: ModelCheck.System {
    struct Member: Identifiable, Equatable, Sendable, CustomStringConvertible {
        let id: Int
        var version: Int

        var description: String { "\(id)@\(version)" }
    }

    /// A request a store sent, waiting for the history to answer it.
    private struct Request: Sendable {
        /// What is asked for, as the history prints it.
        let name: String
        /// The members the server answers with.
        let ids: [Int]
        let answer: @Sendable (Result<[Member], any Error>) -> Void
        /// When it was sent, among the requests of its history.
        var sent = 0
    }

    static let ids = 0..<5
    static let listKeys = 0..<4

    private let byVersion: Bool
    private let checksRule: Bool
    private let requests = Locked<[Request]>([])
    private var sentCount = 0
    private var serverVersions = Dictionary(uniqueKeysWithValues: ids.map { ($0, 1) })
    /// The shape of each list on the server (see ``EntityStep/serverRegroups(_:)``), read by the lists' fetch.
    private let listShapes = Locked<[Int: Int]>([:])
    private var liveVersion = 1_000
    /// The newest request answered for each thing asked for: an older one answered later is not taken (a fetch
    /// started after it was confirmed first).
    private var newestAnswered: [String: Int] = [:]
    /// The copy of each member the rule names.
    private var expected: [Int: Member] = [:]
    private let members: SharedEntities<Member>
    private let lists: Store<Int, [Member]>
    private let details: Store<Int, Member>
    private let feeds: PagedStore<Int, Member, Int>
    private var disagreement: String?

    init(byVersion: Bool, checksRule: Bool) {
        self.byVersion = byVersion
        self.checksRule = checksRule
        let (requests, listShapes) = (requests, listShapes)
        let newerVersion: @Sendable (Member, Member) -> Bool = { $0.version > $1.version }
        members = SharedEntities<Member>(isNewer: byVersion ? newerVersion : nil)
        let listFetch = LoaderFamily<Int, [Member]> { key in
            AnyLoader<[Member]> { completion in
                requests.withLock {
                    let ids = Self.members(ofList: key, shape: listShapes.withLock { $0[key] ?? 0 })
                    $0.append(Request(name: "list \(key)", ids: ids, answer: completion))
                }
                return AnyCancellationToken {}
            }
        }
        let detailFetch = LoaderFamily<Int, Member> { key in
            AnyLoader<Member> { completion in
                let answer: @Sendable (Result<[Member], any Error>) -> Void = { completion($0.map { $0[0] }) }
                requests.withLock { $0.append(Request(name: "detail \(key)", ids: [key], answer: answer)) }
                return AnyCancellationToken {}
            }
        }
        feeds = PagedStore<Int, Member, Int>(
            levels: [.cache(MemoryCache<Int, PagedList<Member, Int>>(), name: "memory")],
            entities: members.held(in: .items())
        ) { key, cursor in
            AnyLoader<Page<Member, Int>> { completion in
                let answer: @Sendable (Result<[Member], any Error>) -> Void = { result in
                    completion(result.map { Page(items: $0, nextCursor: cursor == nil ? 1 : nil) })
                }
                let name = "feed \(key) page \(cursor.map(String.init) ?? "first")"
                requests.withLock {
                    $0.append(Request(name: name, ids: Self.members(ofFeed: key, at: cursor), answer: answer))
                }
                return AnyCancellationToken {}
            }
        }
        let inLists: EntitySharing<[Member]> = members.held(in: .elements)
        let inDetails: EntitySharing<Member> = members.held(in: .whole)
        lists = Store(
            levels: [.cache(MemoryCache<Int, [Member]>(), name: "memory")], fetch: listFetch, entities: inLists)
        details = Store(
            levels: [.cache(MemoryCache<Int, Member>(), name: "memory")], fetch: detailFetch, entities: inDetails)
    }

    deinit {
        // Requests left waiting fail, so that nothing holds the stores.
        for request in requests.withLock({ exchange(&$0, with: []) }) { request.answer(.failure(TestError.model)) }
    }

    /// The members list `key` holds on the server in its shape `shape`.
    private static func members(ofList key: Int, shape: Int) -> [Int] {
        let (first, second) = (key % ids.count, (key + 1) % ids.count)
        switch shape % 4 {
        case 0: return [first, second]
        case 1: return [first, second, first]
        case 2: return [first]
        default: return [second, first, second]
        }
    }

    /// The members on the page of feed `key` that `cursor` points to (two pages: `nil`, then 1).
    private static func members(ofFeed key: Int, at cursor: Int?) -> [Int] {
        cursor == nil ? [key % ids.count] : [(key + 2) % ids.count]
    }

    /// How many requests wait for the server, for a generator's answers.
    var waitingCount: Int { requests.withLock { $0.count } }

    func apply(_ step: EntityStep) {
        switch step {
        case .refreshList(let key): _ = lists.freshValue(of: key).load { _ in }
        case .refreshDetail(let key): _ = details.freshValue(of: key).load { _ in }
        case .answer(let index): answering(index)?()
        case .fail(let index): take(index)?.answer(.failure(TestError.model))
        case .serverEdits(let id): serverVersions[id]! += 1
        case .serverRegroups(let key): listShapes.withLock { $0[key, default: 0] += 1 }
        case .liveUpdate(let id):
            liveVersion += 1
            members.update(Member(id: id, version: liveVersion))
        case .mutate(let id, let accepted):
            liveVersion += 1
            let version = liveVersion
            members.mutate(
                id, { Member(id: $0.id, version: version) },
                commit: AnyLoader<Void> { completion in
                    completion(accepted ? .success(()) : .failure(TestError.model))
                    return AnyCancellationToken {}
                })
        case .writeList(let key):
            let ids = Self.members(ofList: key, shape: listShapes.withLock { $0[key] ?? 0 })
            lists.write(ids.map { Member(id: $0, version: serverVersions[$0]!) }, for: key)
        case .removeList(let key): lists.remove(key)
        case .removeDetail(let key): details.remove(key)
        case .loadNextPage(let feed): _ = feeds.nextPage(of: feed).load { _ in }
        case .refreshFeed(let key): _ = feeds.store.freshValue(of: key).load { _ in }
        case .clearLists: lists.clear()
        case .changeList(let key, let index, let id):
            let answer = answering(index)
            liveVersion += 1
            let (members, update) = (members, Member(id: id, version: liveVersion))
            lists.update(key) { list in
                answer?()
                members.update(update)
                return list
            }
        }
        // The requests the step sent, numbered in the order they were sent.
        requests.withLock { waiting in
            for index in waiting.indices where waiting[index].sent == 0 {
                sentCount += 1
                waiting[index].sent = sentCount
            }
        }
        disagreement = check()
    }

    var checkpoint: EntityCheckpoint { EntityCheckpoint(disagreement: disagreement) }

    /// Takes the request waiting at `index`, notes what its answer brings, and returns what answers it with the
    /// server's members as they are now; `nil` when no request waits there.
    private func answering(_ index: Int) -> (@Sendable () -> Void)? {
        guard let request = take(index) else { return nil }
        let answer = request.ids.map { Member(id: $0, version: serverVersions[$0]!) }
        let taken = request.sent > newestAnswered[request.name] ?? -1
        newestAnswered[request.name] = max(request.sent, newestAnswered[request.name] ?? -1)
        for copy in answer where taken && (!byVersion || copy.version >= (expected[copy.id]?.version ?? 0)) {
            expected[copy.id] = copy
        }
        return { request.answer(.success(answer)) }
    }

    private func take(_ index: Int) -> Request? {
        requests.withLock { $0.indices.contains(index) ? $0.remove(at: index) : nil }
    }

    /// What differs, if anything: a key showing another copy than the entities hold, or (when checking the rule)
    /// a copy other than the one the rule names.
    private func check() -> String? {
        var shown: [Int: [(String, Member)]] = [:]
        for key in Self.listKeys {
            for member in lists.state(for: key).value ?? [] {
                shown[member.id, default: []].append(("list \(key)", member))
            }
        }
        for key in Self.listKeys {
            for member in feeds.store.state(for: key).value?.items ?? [] {
                shown[member.id, default: []].append(("feed \(key)", member))
            }
        }
        for key in Self.ids {
            if let member = details.state(for: key).value {
                shown[member.id, default: []].append(("detail \(key)", member))
            }
        }
        for (id, copies) in shown.sorted(by: { $0.key < $1.key }) {
            let held = members.entity(id)
            let holds = held.map(String.init(describing:)) ?? "nothing"
            guard copies.allSatisfy({ $0.1 == held }) else {
                let listed = copies.map { "\($0.0) shows \($0.1)" }.joined(separator: ", ")
                return "member \(id): the entities hold \(holds); \(listed)"
            }
            if checksRule, let rule = expected[id], held != rule {
                return "member \(id): the copy learned last is \(rule), the keys show \(holds)"
            }
        }
        return nil
    }
}

extension ModelCheck {
    /// Runs an entity history on the real stores, checking that every copy agrees (and, with `checksRule`, is the
    /// one the rule names).
    static func run(
        _ history: [EntityStep], byVersion: Bool, checksRule: Bool
    ) -> Disagreement<EntityStep, EntityCheckpoint>? {
        run(
            history, model: { EntityAgreement() },
            system: { EntityHistoryUnderTest(byVersion: byVersion, checksRule: checksRule) })
    }

    /// Fails the test when some copy disagrees in `history`, with entities deciding by `isNewer` (`byVersion`) and
    /// without; with `checksRule`, also when the copy shown is not the one the rule names.
    static func assertEntitiesAgree(
        _ history: [EntityStep], checksRule: Bool = false, file: StaticString = #filePath, line: UInt = #line
    ) {
        for byVersion in [false, true] {
            if let disagreement = run(history, byVersion: byVersion, checksRule: checksRule) {
                XCTFail("by version: \(byVersion), \(disagreement)", file: file, line: line)
            }
        }
    }

    /// A random entity history of `length` steps from `seed`, made on the real stores at hand so that its answers
    /// name requests that wait; when `racesOnly`, only fetches race (refreshes, answers, failures, the server's
    /// edits).
    static func entityHistory(seed: UInt64, length: Int, racesOnly: Bool) -> [EntityStep] {
        var random = SeededRandom(seed: seed)
        let system = EntityHistoryUnderTest(byVersion: false, checksRule: false)
        let ids = EntityHistoryUnderTest.ids
        let listKeys = EntityHistoryUnderTest.listKeys
        var steps: [EntityStep] = []
        while steps.count < length {
            var roll = Int.random(in: 0..<100, using: &random)
            if racesOnly, roll >= 67 { roll -= 67 }
            let step: EntityStep
            switch roll {
            case 0..<18: step = .refreshList(listKeys.randomElement(using: &random)!)
            case 18..<28: step = .refreshDetail(ids.randomElement(using: &random)!)
            case 28..<50:
                guard system.waitingCount > 0 else { continue }
                step = .answer(request: Int.random(in: 0..<system.waitingCount, using: &random))
            case 50..<55:
                guard system.waitingCount > 0 else { continue }
                step = .fail(request: Int.random(in: 0..<system.waitingCount, using: &random))
            case 55..<63: step = .serverEdits(ids.randomElement(using: &random)!)
            case 63..<67: step = .serverRegroups(listKeys.randomElement(using: &random)!)
            case 67..<77: step = .liveUpdate(ids.randomElement(using: &random)!)
            case 77..<85:
                step = .mutate(ids.randomElement(using: &random)!, accepted: Bool.random(using: &random))
            case 85..<91: step = .writeList(listKeys.randomElement(using: &random)!)
            case 91..<93: step = .removeList(listKeys.randomElement(using: &random)!)
            case 93..<95: step = .loadNextPage(feed: listKeys.randomElement(using: &random)!)
            case 95..<96: step = .refreshFeed(listKeys.randomElement(using: &random)!)
            case 96..<97: step = .removeDetail(ids.randomElement(using: &random)!)
            case 97..<99:
                guard system.waitingCount > 0 else { continue }
                step = .changeList(
                    listKeys.randomElement(using: &random)!,
                    answering: Int.random(in: 0..<system.waitingCount, using: &random),
                    liveUpdate: ids.randomElement(using: &random)!)
            default: step = .clearLists
            }
            system.apply(step)
            steps.append(step)
        }
        return steps
    }
}
