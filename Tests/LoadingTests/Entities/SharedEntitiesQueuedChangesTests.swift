import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// A change queued by a ``MutationQueue`` over a store sharing entities is an optimistic change like
/// `Store.mutate`: shown in every key holding the entity at once, confirmed in all once the server accepts it, undone
/// in all when it refuses it or the change is discarded.
final class SharedEntitiesQueuedChangesTests: XCTestCase {
    private struct Person: Identifiable, Equatable, Sendable {
        let id: String
        var name: String
    }

    private struct Refusal: Error {}

    /// The server's answer to a rename made against an older copy: its own.
    private struct PersonConflict: Error {
        let copy: Person
    }

    private let ada = Person(id: "ada", name: "Ada")
    private let grace = Person(id: "grace", name: "Grace")
    private let renamed = Person(id: "ada", name: "Ada L.")

    /// Lists 0 and 1 (each holding Ada and Grace) and Ada's detail, read, sharing one table of people; a queue of
    /// renames over the details, whose every send the test answers.
    private struct World {
        let lists: Store<Int, [Person]>
        let details: Store<String, Person>
        let queue: MutationQueue<String, Person, String>
        let sends: Locked<[LoaderSpy<Void>]>
    }

    private func makeWorld(
        over folder: URL? = nil, conflicts: MutationConflicts<Person, String>? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> World {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = Store<Int, [Person]>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { _ in Self.answering([ada, grace]) },
            entities: people.held(in: .elements))
        let details = Store<String, Person>(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { _ in Self.answering(ada) },
            entities: people.held(in: .whole))
        for key in 0..<2 { XCTAssertNotNil(read(key, in: lists), file: file, line: line) }
        XCTAssertNotNil(read("ada", in: details), file: file, line: line)
        let directory = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let sends = Locked<[LoaderSpy<Void>]>([])
        let queue = try MutationQueue<String, Person, String>(
            store: details, storage: FileMutationStorage<String>(directory: directory),
            retryDelays: .constant(.seconds(3_600)), scheduler: TestScheduler(), key: { _ in "ada" },
            change: { name, person in person.map { Person(id: $0.id, name: name) } },
            send: { _, _ in
                let send = LoaderSpy<Void>()
                sends.withLock { $0.append(send) }
                return send
            }, isRefused: { $0 is Refusal }, conflicts: conflicts)
        return World(lists: lists, details: details, queue: queue, sends: sends)
    }

    private static func answering<Value: Sendable>(_ value: Value) -> AnyLoader<Value> {
        AnyLoader { completion in
            completion(.success(value))
            return AnyCancellationToken {}
        }
    }

    private func enqueue(_ name: String, in world: World) throws {
        try world.queue.enqueue(name, completion: { _ in })
    }

    func test_aConflictResolvedWithTheServersCopy_showsTheCopyInEveryKeyHoldingTheEntity() throws {
        let copy = Person(id: "ada", name: "Ada Lovelace")
        let world = try makeWorld(
            conflicts: MutationConflicts(serverCopy: { error, _ in (error as? PersonConflict)?.copy }) { _ in
                .takeServerCopy
            })
        try enqueue("Ada L.", in: world)
        XCTAssertTrue(eventually { world.sends.withLock { $0.count } == 1 })

        world.sends.withLock { $0 }[0].fail(with: PersonConflict(copy: copy))

        XCTAssertEqual(world.details.state(for: "ada").value, copy)
        XCTAssertFalse(world.details.state(for: "ada").hasPendingChanges)
        for key in 0..<2 {
            XCTAssertEqual(world.lists.state(for: key).value, [copy, grace], "the server's copy in list \(key)")
            XCTAssertFalse(world.lists.state(for: key).hasPendingChanges, "the change undone in list \(key)")
        }
        XCTAssertFalse(world.queue.isMutating)
    }

    func test_aConflictRebased_showsTheChangeOverTheServersCopyEverywhere_thenConfirmsIt() throws {
        let copy = Person(id: "ada", name: "Ada Lovelace")
        let world = try makeWorld(
            conflicts: MutationConflicts(serverCopy: { error, _ in (error as? PersonConflict)?.copy }) { _ in .rebase })
        try enqueue("Ada L.", in: world)
        XCTAssertTrue(eventually { world.sends.withLock { $0.count } == 1 })

        world.sends.withLock { $0 }[0].fail(with: PersonConflict(copy: copy))

        XCTAssertTrue(eventually { world.sends.withLock { $0.count } == 2 }, "sent again")
        XCTAssertEqual(world.details.state(for: "ada").value, renamed, "the change over the server's copy")
        world.sends.withLock { $0 }[1].complete(with: ())
        XCTAssertEqual(world.details.state(for: "ada").value, renamed)
        XCTAssertFalse(world.details.state(for: "ada").hasPendingChanges)
        for key in 0..<2 {
            XCTAssertEqual(world.lists.state(for: key).value, [renamed, grace], "confirmed in list \(key)")
            XCTAssertFalse(world.lists.state(for: key).hasPendingChanges)
        }
    }

    func test_aQueuedChangeOfAnEntity_showsInEveryKeyHoldingIt_atOnce_andIsConfirmedInAllWhenAccepted() throws {
        let world = try makeWorld()

        try enqueue("Ada L.", in: world)

        XCTAssertEqual(world.details.state(for: "ada").value, renamed)
        for key in 0..<2 {
            XCTAssertEqual(world.lists.state(for: key).value, [renamed, grace], "shown in list \(key) at once")
            XCTAssertTrue(world.lists.state(for: key).hasPendingChanges, "waiting for the server in list \(key)")
        }
        XCTAssertTrue(eventually { world.sends.withLock { $0.count } == 1 }, "sent once")

        world.sends.withLock { $0 }[0].complete(with: ())

        XCTAssertTrue(eventually { world.queue.pending.isEmpty })
        XCTAssertTrue(eventually { (0..<2).allSatisfy { !world.lists.state(for: $0).hasPendingChanges } })
        for key in 0..<2 { XCTAssertEqual(world.lists.state(for: key).value, [renamed, grace], "confirmed") }
        XCTAssertEqual(world.details.state(for: "ada").value, renamed)
        XCTAssertFalse(world.details.state(for: "ada").hasPendingChanges)
    }

    func test_aQueuedChangeOfAnEntity_refusedByTheServer_isUndoneInEveryKey() throws {
        let world = try makeWorld()
        let settled = Locked<[SettledMutation<String>.Outcome]>([])
        try enqueue("Ada L.", in: world)
        let id = try XCTUnwrap(world.queue.pending.first?.id)
        let outcome = expectation(description: "settled")
        Task {
            if let ended = try? await world.queue.outcome(of: id) { settled.withLock { $0.append(ended) } }
            outcome.fulfill()
        }
        XCTAssertTrue(eventually { world.sends.withLock { $0.count } == 1 })

        world.sends.withLock { $0 }[0].fail(with: Refusal())

        wait(for: [outcome], timeout: .watchdog)
        XCTAssertEqual(settled.withLock { $0.count }, 1)
        guard case .refused = settled.withLock({ $0 }).first else { return XCTFail("refused: \(settled)") }
        XCTAssertEqual(world.details.state(for: "ada").value, ada, "undone in the detail")
        for key in 0..<2 { XCTAssertEqual(world.lists.state(for: key).value, [ada, grace], "and in list \(key)") }
        XCTAssertTrue(world.queue.pending.isEmpty)
    }

    func test_aQueuedChangeOfAnEntity_discarded_isUndoneInEveryKey_andNeverConfirmed() throws {
        let world = try makeWorld()
        try enqueue("Ada L.", in: world)
        let id = try XCTUnwrap(world.queue.pending.first?.id)
        XCTAssertEqual(world.lists.state(for: 1).value, [renamed, grace])

        world.queue.discard(id)

        XCTAssertTrue(eventually { world.lists.state(for: 1).value == [ada, grace] }, "undone in the lists")
        XCTAssertEqual(world.lists.state(for: 0).value, [ada, grace])
        XCTAssertEqual(world.details.state(for: "ada").value, ada)
        XCTAssertTrue(world.queue.pending.isEmpty)
    }

    func test_aLogout_dropsAQueuedChangeOfAnEntity_fromEveryKey() throws {
        let world = try makeWorld()
        try enqueue("Ada L.", in: world)
        XCTAssertEqual(world.lists.state(for: 0).value, [renamed, grace])

        let cleared = expectation(description: "cleared")
        world.details.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)

        XCTAssertTrue(eventually { world.queue.pending.isEmpty }, "the logout drops the queued change")
        XCTAssertNil(world.details.state(for: "ada").value)
        XCTAssertTrue(
            eventually { (0..<2).allSatisfy { world.lists.state(for: $0).value == [self.ada, self.grace] } },
            "the lists (another store, not logged out) no longer show the dropped change")
    }

    func test_aQueuedChangeOfAnEntity_keptAcrossALaunch_showsAgainInEveryKeyHoldingIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        do {
            let before = try makeWorld(over: folder)
            try enqueue("Ada L.", in: before)
            XCTAssertEqual(before.queue.pending.count, 1)
        }

        // The next launch: new stores, read before the queue is made, and a queue over the same folder.
        let after = try makeWorld(over: folder)

        XCTAssertEqual(after.queue.pending.map(\.input), ["Ada L."], "kept")
        XCTAssertEqual(after.details.state(for: "ada").value, renamed)
        for key in 0..<2 { XCTAssertEqual(after.lists.state(for: key).value, [renamed, grace], "in list \(key)") }
    }
}
