import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// An item created offline survives a kill between the server's answer to its creation and the rewrite of the
/// mutations naming it: a child process (this test binary, run on ``OfflineCreationKillChild``) queues a creation
/// and its edits offline, comes online, and is killed at that moment; the next launch ends with one item, under the
/// server's id, on the server and in the store.
final class OfflineCreationKillTests: XCTestCase {
    func test_killedAfterTheServerCreatedTheItem_theNextLaunchSendsItAgain_andTheServerKeepsOne() throws {
        let folder = try runChild(killing: .afterTheAnswer, deleting: false)
        XCTAssertEqual(folder.server.items, [TestItem(id: "s-1", name: "Ann")], "the child's creation reached it")

        let launch = try Launch(folder)

        XCTAssertEqual(folder.server.creations, 2, "sent again with its idempotency key")
        XCTAssertEqual(folder.server.items, [TestItem(id: "s-1", name: "Anna")], "one item, edited")
        XCTAssertEqual(launch.shown(), [TestItem(id: "s-1", name: "Anna")])
        XCTAssertEqual(try launch.storage.loadAll().count, 0)
    }

    func test_killedAfterTheServersIDWasSaved_theNextLaunchDoesNotSendTheCreationAgain() throws {
        // A server that ignores idempotency keys: a second creation would make a second item.
        let folder = try runChild(killing: .afterTheIDIsSaved, deleting: false, honoursIdempotency: false)
        XCTAssertEqual(folder.server.items, [TestItem(id: "s-1", name: "Ann")])

        let launch = try Launch(folder)

        XCTAssertEqual(folder.server.creations, 1, "the server's id was kept with the creation")
        XCTAssertEqual(folder.server.items, [TestItem(id: "s-1", name: "Anna")])
        XCTAssertEqual(launch.shown(), [TestItem(id: "s-1", name: "Anna")])
        XCTAssertEqual(try launch.storage.loadAll().count, 0)
    }

    func test_aCreationItsEditAndItsDelete_killedAfterTheAnswer_endWithNothing() throws {
        let folder = try runChild(killing: .afterTheAnswer, deleting: true)

        let launch = try Launch(folder)

        XCTAssertEqual(folder.server.items, [], "created once, then deleted under the server's id")
        XCTAssertEqual(folder.server.creations, 2)
        XCTAssertEqual(launch.shown(), [])
        XCTAssertEqual(try launch.storage.loadAll().count, 0)
    }

    private func runChild(
        killing moment: OfflineCreationKillChild.Moment, deleting: Bool, honoursIdempotency: Bool = true
    ) throws -> KillFolder {
        let folder = KillFolder(
            FileManager.default.temporaryDirectory.appendingPathComponent("created-kill-\(UUID().uuidString)"),
            honoursIdempotency: honoursIdempotency)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder.url) }
        var environment = [
            OfflineCreationKillChild.folderVariable: folder.url.path,
            OfflineCreationKillChild.momentVariable: moment.rawValue,
            OfflineCreationKillChild.idempotencyVariable: honoursIdempotency ? "1" : "0",
        ]
        if deleting { environment[OfflineCreationKillChild.deletingVariable] = "1" }
        let said = try runChildUntilKilled(
            "OfflineCreationKillChild/test_runsWhenStartedByTheKillTest", environment: environment)
        XCTAssertEqual(said, moment.rawValue, "the child reached the moment it is killed at")
        return folder
    }
}

/// The next launch after the kill: a store fetching the list from the server, and the queue over the same folder.
private struct Launch {
    let store: Store<String, [TestItem]>
    let storage: FileMutationStorage<ItemChange>
    let queue: MutationQueue<String, [TestItem], ItemChange>

    init(_ folder: KillFolder) throws {
        let server = folder.server
        store = Store(
            levels: [],
            fetch: LoaderFamily { _ in
                AnyLoader { completion in
                    completion(.success(server.items))
                    return AnyCancellationToken {}
                }
            })
        storage = FileMutationStorage(directory: folder.outbox)
        queue = try OfflineCreationKillChild.makeQueue(store, storage, server, ManualConnectivity())
    }

    func shown() -> [TestItem]? {
        let recorder = LoadRecorder<StoreResponse<[TestItem]>>()
        _ = recorder.load(store.read("list"))
        return recorder.values.last?.value
    }
}

/// The folder a child and the next launch share: the queue's storage, and the server's state.
struct KillFolder {
    let url: URL
    let server: FileItemServer

    var outbox: URL { url.appendingPathComponent("outbox") }

    init(_ url: URL, honoursIdempotency: Bool) {
        self.url = url
        server = FileItemServer(
            file: url.appendingPathComponent("server.json"), honoursIdempotency: honoursIdempotency)
    }
}

/// A server whose state is a file, so that a killed process and the next launch talk to the same one. Creations
/// are numbered `s-1`, `s-2`…; one sent again with an idempotency key it saw answers the same id, when it honours
/// them. An edit or a delete of an item it does not hold is refused.
final class FileItemServer: Sendable {
    private struct State: Codable {
        var items: [TestItem] = []
        var created: [String: String] = [:]
        var creations = 0
    }

    private let file: URL
    private let honoursIdempotency: Bool
    private let lock = Locked(())

    init(file: URL, honoursIdempotency: Bool) {
        self.file = file
        self.honoursIdempotency = honoursIdempotency
    }

    var items: [TestItem] { read().items }
    /// How many creation requests it received.
    var creations: Int { read().creations }

    /// Applies `change`: a creation's answer is the item's id.
    func apply(_ change: ItemChange, idempotencyKey: String) throws -> String? {
        try lock.withLock { _ in
            var state = read()
            defer { try? JSONEncoder().encode(state).write(to: file, options: .atomic) }
            switch change {
            case .add(_, let name):
                state.creations += 1
                if honoursIdempotency, let id = state.created[idempotencyKey] { return id }
                let id = "s-\(state.items.count + state.created.count + 1)"
                state.created[idempotencyKey] = id
                state.items.append(TestItem(id: id, name: name))
                return id
            case .rename(let id, let name):
                guard let index = state.items.firstIndex(where: { $0.id == id }) else { throw Refused() }
                state.items[index].name = name
                return nil
            case .delete(let id):
                guard state.items.contains(where: { $0.id == id }) else { throw Refused() }
                state.items.removeAll { $0.id == id }
                return nil
            }
        }
    }

    private func read() -> State {
        (try? JSONDecoder().decode(State.self, from: Data(contentsOf: file))) ?? State()
    }
}

/// A storage that stops its process at a moment of the queue's work: once it saved the server's id of a creation.
private struct KillingStorage: MutationStorage {
    let storage: FileMutationStorage<ItemChange>

    func loadAll() throws -> [StoredMutation<ItemChange>] { try storage.loadAll() }
    func remove(_ mutation: StoredMutation<ItemChange>) throws { try storage.remove(mutation) }

    func save(_ mutation: StoredMutation<ItemChange>) throws {
        try storage.save(mutation)
        guard mutation.serverID != nil else { return }
        OfflineCreationKillChild.reach(.afterTheIDIsSaved)
    }
}

/// The child side of ``OfflineCreationKillTests``: skipped unless run by it.
final class OfflineCreationKillChild: XCTestCase {
    static let folderVariable = "LOADING_CREATION_KILL_FOLDER"
    static let momentVariable = "LOADING_CREATION_KILL_MOMENT"
    static let deletingVariable = "LOADING_CREATION_KILL_DELETING"
    static let idempotencyVariable = "LOADING_CREATION_KILL_IDEMPOTENCY"

    /// When the child is killed.
    enum Moment: String {
        /// The server created the item; its answer has not reached the queue.
        case afterTheAnswer = "after-the-answer"
        /// The queue saved the server's id with the creation; nothing is rewritten yet.
        case afterTheIDIsSaved = "after-the-id-is-saved"
    }

    /// Says the child is at `moment`, and waits there for the parent to kill it.
    static func reach(_ moment: Moment) {
        ChildTest.say(killNowMarker + moment.rawValue)
        ChildTest.waitToBeKilled()
    }

    static func makeQueue(
        _ store: Store<String, [TestItem]>, _ storage: some MutationStorage<ItemChange>, _ server: FileItemServer,
        _ connectivity: ManualConnectivity, killedAfterTheAnswer: Bool = false
    ) throws -> MutationQueue<String, [TestItem], ItemChange> {
        try MutationQueue(
            store: store, storage: storage, connectivity: connectivity, key: { _ in "list" },
            change: ItemChange.apply,
            send: { change, idempotencyKey in
                AnyLoader { completion in
                    completion(Result { _ = try server.apply(change, idempotencyKey: idempotencyKey) })
                    return AnyCancellationToken {}
                }
            },
            isRefused: { $0 is Refused },
            creation: OfflineCreation(
                temporaryID: \.createdID, replacingIDs: { $0.replacingIDs($1) },
                send: { change, idempotencyKey in
                    AnyLoader { completion in
                        let answer = Result { try server.apply(change, idempotencyKey: idempotencyKey) ?? "" }
                        if killedAfterTheAnswer { reach(.afterTheAnswer) }
                        completion(answer)
                        return AnyCancellationToken {}
                    }
                }))
    }

    func test_runsWhenStartedByTheKillTest() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = environment[Self.folderVariable], let moment = environment[Self.momentVariable] else {
            throw XCTSkip("the child process of OfflineCreationKillTests: it runs only when that test starts it")
        }
        let folder = KillFolder(
            URL(fileURLWithPath: path), honoursIdempotency: environment[Self.idempotencyVariable] == "1")
        let store = Store<String, [TestItem]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[TestItem]>() })
        store.write([], for: "list")
        let storage = FileMutationStorage<ItemChange>(directory: folder.outbox)
        let connectivity = ManualConnectivity(isOnline: false)
        let queue =
            moment == Moment.afterTheAnswer.rawValue
            ? try Self.makeQueue(store, storage, folder.server, connectivity, killedAfterTheAnswer: true)
            : try Self.makeQueue(store, KillingStorage(storage: storage), folder.server, connectivity)
        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
        if environment[Self.deletingVariable] != nil { try queue.enqueue(.delete(id: "tmp-1")) }
        connectivity.setOnline(true)
        // The parent killed this process at the moment; if it did not, the test fails in the parent.
        XCTFail("the child went past the moment it is killed at")
    }
}
