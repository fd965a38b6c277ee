import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Random histories over three stores sharing entities (lists of members, one member's detail, and paged feeds of
/// members): fetches and pages answered in any order or failed, the server's copies edited meanwhile, live updates,
/// optimistic changes accepted or refused, writes, removals and clears. After every step, every key holding an entity
/// shows the same copy of it, the one the entities hold, whatever order things happened in: the copies and the fetches
/// agree. One history in three only races fetches (refreshes answered in any order or failed, the server editing
/// meanwhile): there the copy shown is also the one the rule names, the copy learned last (or, with `isNewer`, the
/// newest learned).
final class EntityAgreementTests: XCTestCase {
    private struct Member: Identifiable, Equatable, Sendable, CustomStringConvertible {
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

    private static let ids = 0..<5
    private static let listKeys = 0..<4

    /// The members list `key` holds on the server.
    private static func members(ofList key: Int) -> [Int] {
        [key % ids.count, (key + 1) % ids.count]
    }

    /// The members on the page of feed `key` that `cursor` points to (two pages: `nil`, then 1).
    private static func members(ofFeed key: Int, at cursor: Int?) -> [Int] {
        cursor == nil ? [key % ids.count] : [(key + 2) % ids.count]
    }

    /// 400 histories, or `LOADING_MODEL_HISTORIES` of them (a longer hunt, as the model check's soak).
    func test_randomHistories_keepEveryCopyAgreed() {
        let histories = UInt64(ProcessInfo.processInfo.environment["LOADING_MODEL_HISTORIES"] ?? "") ?? 400
        for seed in UInt64(1)...max(histories, 1) {
            var generator = SeededRandom(seed: seed)
            if let failure = run(seed: seed, steps: 80, generator: &generator) {
                return XCTFail("seed \(seed): \(failure)")
            }
        }
    }

    /// Runs one history; what disagreed, if anything.
    private func run(seed: UInt64, steps: Int, generator: inout SeededRandom) -> String? {
        var serverVersions = Dictionary(uniqueKeysWithValues: Self.ids.map { ($0, 1) })
        var liveVersion = 1_000
        let requests = Locked<[Request]>([])
        var sentCount = 0
        /// The newest request answered for each thing asked for: an older one answered later is not taken (a fetch
        /// started after it was confirmed first).
        var newestAnswered: [String: Int] = [:]
        let byVersion = seed % 2 == 0
        let racesOnly = seed % 3 == 0
        /// The copy of each member the rule names, in a history that only races fetches.
        var expected: [Int: Member] = [:]
        let newerVersion: @Sendable (Member, Member) -> Bool = { $0.version > $1.version }
        let members = SharedEntities<Member>(isNewer: byVersion ? newerVersion : nil)
        let listFetch = LoaderFamily<Int, [Member]> { key in
            AnyLoader<[Member]> { completion in
                requests.withLock {
                    $0.append(Request(name: "list \(key)", ids: Self.members(ofList: key), answer: completion))
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
        let feeds = PagedStore<Int, Member, Int>(
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
        let lists = Store<Int, [Member]>(
            levels: [.cache(MemoryCache<Int, [Member]>(), name: "memory")], fetch: listFetch, entities: inLists)
        let details = Store<Int, Member>(
            levels: [.cache(MemoryCache<Int, Member>(), name: "memory")], fetch: detailFetch, entities: inDetails)
        var log: [String] = []
        for _ in 0..<steps {
            var step = Int.random(in: 0..<100, using: &generator)
            if racesOnly, step >= 67 { step -= 67 }  // refreshes, answers, failures and the server's edits only
            switch step {
            case 0..<18:
                let key = Self.listKeys.randomElement(using: &generator)!
                log.append("refresh list \(key)")
                _ = lists.freshValue(of: key).load { _ in }
            case 18..<28:
                let key = Self.ids.randomElement(using: &generator)!
                log.append("refresh detail \(key)")
                _ = details.freshValue(of: key).load { _ in }
            case 28..<50:
                let waiting = requests.withLock { $0.count }
                guard waiting > 0 else { continue }
                let index = Int.random(in: 0..<waiting, using: &generator)
                let request = requests.withLock { $0.remove(at: index) }
                let answer = request.ids.map { Member(id: $0, version: serverVersions[$0]!) }
                log.append("answer \(request.name) with \(answer)")
                request.answer(.success(answer))
                let taken = request.sent > newestAnswered[request.name] ?? -1
                newestAnswered[request.name] = max(request.sent, newestAnswered[request.name] ?? -1)
                for copy in answer where taken && (!byVersion || copy.version >= (expected[copy.id]?.version ?? 0)) {
                    expected[copy.id] = copy
                }
            case 50..<55:
                let waiting = requests.withLock { $0.count }
                guard waiting > 0 else { continue }
                let index = Int.random(in: 0..<waiting, using: &generator)
                log.append("fail request \(index)")
                requests.withLock { $0.remove(at: index) }.answer(.failure(TestError.model))
            case 55..<67:
                let id = Self.ids.randomElement(using: &generator)!
                serverVersions[id]! += 1
                log.append("server edits \(id) to \(serverVersions[id]!)")
            case 67..<77:
                let id = Self.ids.randomElement(using: &generator)!
                liveVersion += 1
                let copy = Member(id: id, version: liveVersion)
                log.append("live update \(copy)")
                members.update(copy)
            case 77..<85:
                let id = Self.ids.randomElement(using: &generator)!
                let accepted = Bool.random(using: &generator)
                liveVersion += 1
                let version = liveVersion
                log.append("mutate \(id) to \(version), \(accepted ? "accepted" : "refused")")
                members.mutate(
                    id, { Member(id: $0.id, version: version) },
                    commit: AnyLoader<Void> { completion in
                        completion(accepted ? .success(()) : .failure(TestError.model))
                        return AnyCancellationToken {}
                    })
            case 85..<91:
                let key = Self.listKeys.randomElement(using: &generator)!
                let list = Self.members(ofList: key).map { Member(id: $0, version: serverVersions[$0]!) }
                log.append("write list \(key) \(list)")
                lists.write(list, for: key)
            case 91..<93:
                let key = Self.listKeys.randomElement(using: &generator)!
                log.append("remove list \(key)")
                lists.remove(key)
            case 93..<95:
                let key = Self.listKeys.randomElement(using: &generator)!
                log.append("next page of feed \(key)")
                _ = feeds.nextPage(of: key).load { _ in }
            case 95..<96:
                let key = Self.listKeys.randomElement(using: &generator)!
                log.append("refresh feed \(key)")
                _ = feeds.store.freshValue(of: key).load { _ in }
            case 96..<98:
                let key = Self.ids.randomElement(using: &generator)!
                log.append("remove detail \(key)")
                details.remove(key)
            default:
                log.append("clear lists")
                lists.clear()
            }
            // The requests the step sent, numbered in the order they were sent.
            requests.withLock { waiting in
                for index in waiting.indices where waiting[index].sent == 0 {
                    sentCount += 1
                    waiting[index].sent = sentCount
                }
            }
            if let disagreement = check(members, lists, details, feeds, expected: racesOnly ? expected : nil) {
                return "\(disagreement)\nafter:\n  " + log.joined(separator: "\n  ")
            }
        }
        // Requests left waiting fail, so that nothing holds the stores.
        for request in requests.withLock({ exchange(&$0, with: []) }) { request.answer(.failure(TestError.model)) }
        return nil
    }

    /// Whether every key holding an entity shows the copy the entities hold, and that copy is the `expected` one when
    /// given; what differs, if not.
    private func check(
        _ members: SharedEntities<Member>, _ lists: Store<Int, [Member]>, _ details: Store<Int, Member>,
        _ feeds: PagedStore<Int, Member, Int>, expected: [Int: Member]?
    ) -> String? {
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
        for (id, copies) in shown {
            let held = members.entity(id)
            guard copies.allSatisfy({ $0.1 == held }) else {
                let listed = copies.map { "\($0.0) shows \($0.1)" }.joined(separator: ", ")
                return "member \(id): the entities hold \(held.map(String.init(describing:)) ?? "nothing"); \(listed)"
            }
            if let expected, let rule = expected[id], held != rule {
                return
                    "member \(id): the copy learned last is \(rule), the keys show \(held.map(String.init(describing:)) ?? "nothing")"
            }
        }
        return nil
    }
}
