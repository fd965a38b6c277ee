import Dispatch
import Foundation
import Loading
import LoadingTestSupport
import XCTest

/// Items created offline: a creation queued under a temporary id, edited under it, and followed by the id the server
/// gives it, in the store, in the queue and in the storage; a refused creation undone alone with what names it.
final class OfflineCreationTests: XCTestCase {
    func test_theServersID_replacesTheTemporaryOne_inTheStore_theQueue_andTheStorage() throws {
        let environment = try Environment(directory: makeDirectory())
        let settled = Locked<[SettledMutation<ItemChange>]>([])
        let queue = try environment.makeQueue { mutation in settled.withLock { $0.append(mutation) } }

        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
        XCTAssertEqual(environment.shown(), [TestItem(id: "tmp-1", name: "Anna")], "shown at once, offline")
        let history = Locked<[[TestItem]]>([])
        let subscription = environment.store.changes(for: "list").sink { value in
            history.withLock { $0.append(value.value ?? []) }
        }
        defer { withExtendedLifetime(subscription) {} }

        environment.connectivity.setOnline(true)
        XCTAssertEqual(environment.creations.requests, [.add(id: "tmp-1", name: "Ann")])
        environment.creations.answer(0, with: "s-1")

        XCTAssertEqual(environment.shown(), [TestItem(id: "s-1", name: "Anna")], "one item, under the server's id")
        XCTAssertEqual(queue.pending.map(\.input), [.rename(id: "s-1", name: "Anna")])
        XCTAssertEqual(try environment.storage.loadAll().map(\.input), [.rename(id: "s-1", name: "Anna")])
        XCTAssertEqual(environment.edits.requests, [.rename(id: "s-1", name: "Anna")], "the edit names the new id")
        XCTAssertEqual(queue.serverID(for: "tmp-1"), "s-1")

        environment.edits.answer(0)
        XCTAssertEqual(environment.confirmed(), [TestItem(id: "s-1", name: "Anna")])
        XCTAssertEqual(try environment.storage.loadAll().count, 0)
        XCTAssertEqual(settled.withLock { $0.map(\.serverID) }, ["s-1", nil])
        for shown in history.withLock({ $0 }) {
            XCTAssertLessThanOrEqual(shown.count, 1, "never the item twice: \(shown)")
            XCTAssertNotEqual(shown.first?.name, "Ann", "never the edit lost: \(shown)")
        }
    }

    func test_theServersID_replacesTheTemporaryOne_inOnePublication() throws {
        for (editsPending, rewritesValues) in [(0, false), (1, false), (0, true), (1, true)] {
            let environment = try Environment(directory: makeDirectory())
            let queue = try environment.makeQueue(replacingIDsInValue: rewritesValues)
            try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
            if editsPending == 1 { try queue.enqueue(.rename(id: "tmp-1", name: "Anna")) }
            environment.connectivity.setOnline(true)
            let published = StreamRecorder(environment.store.changes(for: "list"))
            let before = published.values.count

            environment.creations.answer(0, with: "s-1")

            let after = published.values.dropFirst(before)
            let name = editsPending == 1 ? "Anna" : "Ann"
            XCTAssertEqual(
                after.map(\.value), [[TestItem(id: "s-1", name: name)]],
                "with \(editsPending) edit pending: the item under the server's id, once: \(after.map(\.value))")
            XCTAssertEqual(after.last?.hasPendingChanges, editsPending == 1)
        }
    }

    func test_withTheValuesIDsReplaced_aReplayAppliesEachChangeAFewTimes_howeverManyWait() throws {
        // Without the value's rewrite, each creation's answer applies every change pending on its key again.
        for (items, rewritesValues) in [(50, true), (200, true), (50, false)] {
            let environment = try Environment(directory: makeDirectory())
            let applied = Locked(0)
            let queue = try environment.makeQueue(replacingIDsInValue: rewritesValues) {
                applied.withLock { $0 += 1 }
            }
            for item in 0..<items {
                try queue.enqueue(.add(id: "tmp-\(item)", name: "Item \(item)"))
                try queue.enqueue(.rename(id: "tmp-\(item)", name: "Item \(item)'"))
            }
            let published = StreamRecorder(environment.store.changes(for: "list"))
            applied.withLock { $0 = 0 }
            environment.creations.answerEachAtOnce(with: { "s-\($0)" })
            environment.edits.answerEachAtOnce(with: { _ in () })

            environment.connectivity.setOnline(true)

            XCTAssertFalse(queue.isMutating)
            let expected = (0..<items).map { TestItem(id: "s-\($0 + 1)", name: "Item \($0)'") }
            XCTAssertTrue(environment.confirmed() == expected, "\(items) items: each confirmed, under the server's id")
            let perMutation = Double(applied.withLock { $0 }) / Double(2 * items)
            if rewritesValues {
                XCTAssertLessThanOrEqual(perMutation, 2, "\(items) items: applied \(perMutation) times per mutation")
            } else {
                XCTAssertGreaterThan(perMutation, 10, "\(items) items: the changes pending are applied again")
            }
            let shown = published.values.map { $0.value ?? [] }
            XCTAssertTrue(shown.allSatisfy { $0.map(\.name) == expected.map(\.name) }, "each item, edited, in order")
            XCTAssertTrue(shown.allSatisfy { Set($0.map(\.id)).count == items }, "no item twice")
            XCTAssertTrue(shown.last == expected, "the last publication shows the server's ids")
        }
    }

    func test_aMutationMadeUnderTheTemporaryID_afterTheCreationWasAccepted_isSentUnderTheServersID() throws {
        let environment = try Environment(directory: makeDirectory())
        let queue = try environment.makeQueue()
        environment.connectivity.setOnline(true)
        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        environment.creations.answer(0, with: "s-1")

        // A screen still holding the temporary id edits the item.
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))

        XCTAssertEqual(environment.edits.requests, [.rename(id: "s-1", name: "Anna")])
        environment.edits.answer(0)
        XCTAssertEqual(environment.confirmed(), [TestItem(id: "s-1", name: "Anna")])
    }

    func test_aRefusedCreation_isUndoneWithTheMutationsNamingItsItem_andTheOthersAreSent() throws {
        let environment = try Environment(directory: makeDirectory())
        let settled = Locked<[SettledMutation<ItemChange>]>([])
        let queue = try environment.makeQueue { mutation in settled.withLock { $0.append(mutation) } }
        let refusal = LoadRecorder<Void>()
        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.add(id: "tmp-2", name: "Bob"))
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna")) { refusal.record($0) }
        try queue.enqueue(.rename(id: "tmp-2", name: "Bobby"))

        environment.connectivity.setOnline(true)
        environment.creations.refuse(0)

        XCTAssertEqual(environment.shown(), [TestItem(id: "tmp-2", name: "Bobby")], "the refused item is gone")
        XCTAssertEqual(
            refusal.errors.first as? MutationQueueError, .creationRefused(temporaryID: "tmp-1"),
            "the edit of the refused item fails, unsent")
        XCTAssertEqual(
            try environment.storage.loadAll().map(\.input),
            [.add(id: "tmp-2", name: "Bob"), .rename(id: "tmp-2", name: "Bobby")])
        XCTAssertEqual(environment.creations.requests.count, 2, "the other creation is sent next")

        environment.creations.answer(1, with: "s-2")
        environment.edits.answer(0)

        XCTAssertEqual(environment.edits.requests, [.rename(id: "s-2", name: "Bobby")])
        XCTAssertEqual(environment.confirmed(), [TestItem(id: "s-2", name: "Bobby")])
        XCTAssertEqual(settled.withLock { $0.map(\.outcome.description) }.count, 4)
        XCTAssertFalse(queue.isMutating)
    }

    func test_aMutationNamingARefusedCreationsItem_isNeverSent_evenWhenItComesNext() throws {
        let environment = try Environment(directory: makeDirectory())
        let settled = Locked<[SettledMutation<ItemChange>]>([])
        let queue = try environment.makeQueue { mutation in settled.withLock { $0.append(mutation) } }
        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
        try queue.enqueue(.add(id: "tmp-2", name: "Bob"))
        environment.connectivity.setOnline(true)

        environment.creations.refuse(0)

        XCTAssertEqual(environment.edits.requests, [], "the edit of the refused item is not sent")
        XCTAssertEqual(environment.creations.requests.map(\.createdID), ["tmp-1", "tmp-2"], "the next creation is")
        XCTAssertEqual(queue.pending.map(\.input), [.add(id: "tmp-2", name: "Bob")])
        XCTAssertEqual(environment.shown(), [TestItem(id: "tmp-2", name: "Bob")])
        XCTAssertEqual(settled.withLock { $0.map(\.outcome.description) }.count, 2)
    }

    func test_aDiscardedCreation_takesTheMutationsNamingItsItemWithIt() throws {
        let environment = try Environment(directory: makeDirectory())
        let queue = try environment.makeQueue()
        let created = try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
        try queue.enqueue(.add(id: "tmp-2", name: "Bob"))

        queue.discard(created)

        XCTAssertEqual(queue.pending.map(\.input), [.add(id: "tmp-2", name: "Bob")])
        XCTAssertEqual(environment.shown(), [TestItem(id: "tmp-2", name: "Bob")])
        XCTAssertEqual(try environment.storage.loadAll().map(\.input), [.add(id: "tmp-2", name: "Bob")])
    }

    /// A creation discarded while an edit naming its item is being enqueued: the edit goes with it, told as
    /// discarded once, and its enqueue returns as any does (no logout happened).
    func test_aCreationDiscardedWhileAnEditNamingItIsEnqueued_takesTheEditWithIt_andTheEnqueueReturns() throws {
        let environment = try Environment(directory: makeDirectory())
        let (armed, applied, proceed) = (Locked(false), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let settled = Locked<[String]>([])
        let queue = try environment.makeQueue(
            storage: environment.storage,
            applying: {
                guard armed.withLock({ exchange(&$0, with: false) }) else { return }
                applied.signal()
                proceed.wait()
            },
            onSettled: { mutation in settled.withLock { $0.append("\(mutation.input): \(mutation.outcome)") } })
        let screen = StreamRecorder(environment.store.changes(for: "list"))  // each change is applied as it comes
        let created = try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        armed.withLock { $0 = true }

        let enqueued = Locked<Result<String, any Error>?>(nil)
        let returned = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            enqueued.withLock { $0 = Result { try queue.enqueue(.rename(id: "tmp-1", name: "Anna")) } }
            returned.signal()
        }
        XCTAssertEqual(applied.wait(timeout: .now() + 60), .success, "the edit is being shown")
        queue.discard(created)
        proceed.signal()
        XCTAssertEqual(returned.wait(timeout: .now() + 60), .success)

        XCTAssertNoThrow(try enqueued.withLock { $0 }?.get(), "nobody logged out")
        XCTAssertEqual(
            settled.withLock { $0 },
            [
                "\(ItemChange.add(id: "tmp-1", name: "Ann")): discarded",
                "\(ItemChange.rename(id: "tmp-1", name: "Anna")): discarded",
            ])
        XCTAssertEqual(queue.pending.count, 0)
        XCTAssertEqual(environment.shown(), [])
        XCTAssertEqual(screen.values.last?.value, [])
        XCTAssertEqual(try environment.storage.loadAll().map(\.input), [])
    }

    func test_aLogoutRacingTheServersAnswer_leavesNothingShownKeptOrSent() throws {
        for run in 0..<50 {
            let environment = try Environment(directory: makeDirectory())
            let queue = try environment.makeQueue(replacingIDsInValue: run % 2 == 1)
            let screen = environment.store.changes(for: "list").sink { _ in }
            defer { screen.cancel() }
            try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
            try queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
            environment.connectivity.setOnline(true)

            let cleared = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                environment.store.clear { cleared.signal() }
            }
            environment.creations.answer(0, with: "s-1")
            cleared.wait()
            // The answer may have come first, and the edit gone out, under the server's id, before the logout began.
            let sentBeforeTheLogout = environment.edits.requests
            Thread.sleep(forTimeInterval: 0.02)  // what a late pump would send

            XCTAssertEqual(try environment.storage.loadAll().map(\.input), [], "nothing kept for the next user")
            XCTAssertFalse(queue.isMutating)
            XCTAssertEqual(environment.edits.requests, sentBeforeTheLogout, "nothing goes out after the logout")
            XCTAssert(
                sentBeforeTheLogout.allSatisfy { $0 == .rename(id: "s-1", name: "Anna") },
                "an edit sent before the logout names the server's id: \(sentBeforeTheLogout)")
            XCTAssertNil(environment.shown() ?? nil, "nothing of the item shown")
        }
    }

    func test_anEditRacingTheServersAnswer_isSentAndShownUnderTheServersID() throws {
        for run in 0..<50 {
            let environment = try Environment(directory: makeDirectory())
            let queue = try environment.makeQueue(replacingIDsInValue: run % 2 == 1)
            let screen = StreamRecorder(environment.store.changes(for: "list"))
            try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
            environment.connectivity.setOnline(true)

            let enqueued = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                _ = try? queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
                enqueued.signal()
            }
            environment.creations.answer(0, with: "s-1")
            enqueued.wait()

            XCTAssertEqual(environment.shown(), [TestItem(id: "s-1", name: "Anna")])
            XCTAssertEqual(screen.values.last?.value, [TestItem(id: "s-1", name: "Anna")], "and the screen was told")
            // The creation leaves the storage once the store kept the item; the edit is sent after it.
            XCTAssertTrue(eventually { environment.edits.requests == [.rename(id: "s-1", name: "Anna")] })
            XCTAssertEqual(try environment.storage.loadAll().map(\.input), [.rename(id: "s-1", name: "Anna")])
        }
    }

    func test_anEditSavedWhileTheServersIDArrives_isKeptUnderTheServersID() throws {
        for rewritesValues in [false, true] {
            try checkAnEditSavedWhileTheServersIDArrives(rewritesValues: rewritesValues)
        }
    }

    private func checkAnEditSavedWhileTheServersIDArrives(rewritesValues: Bool) throws {
        let environment = try Environment(directory: makeDirectory())
        let gate = SaveGate(environment.storage)
        let queue = try environment.makeQueue(storage: gate, replacingIDsInValue: rewritesValues)
        let screen = StreamRecorder(environment.store.changes(for: "list"))
        try queue.enqueue(.add(id: "tmp-1", name: "Ann"))
        try queue.enqueue(.add(id: "tmp-2", name: "Bob"))  // the edit waits behind it, unsent
        environment.connectivity.setOnline(true)

        // The edit's save under its temporary id is slow: the server's id arrives meanwhile.
        gate.holdSaves(of: .rename(id: "tmp-1", name: "Anna"))
        let enqueued = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? queue.enqueue(.rename(id: "tmp-1", name: "Anna"))
            enqueued.signal()
        }
        gate.waitUntilHeld()
        environment.creations.answer(0, with: "s-1")
        gate.release()
        enqueued.wait()

        XCTAssertEqual(
            try environment.storage.loadAll().map(\.input),
            [.add(id: "tmp-2", name: "Bob"), .rename(id: "s-1", name: "Anna")],
            "the slow save under the temporary id does not outlast the rewrite")
        let shown = [TestItem(id: "s-1", name: "Anna"), TestItem(id: "tmp-2", name: "Bob")]
        XCTAssertEqual(environment.shown(), shown)
        XCTAssertEqual(screen.values.last?.value, shown, "and the screen was told")
    }

    func test_samples() throws {
        let api = ItemAPI()
        let support = makeDirectory()
        let items = Store<String, [TestItem]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[TestItem]>() })
        items.write([], for: "all")
        let connectivity = ManualConnectivity(isOnline: false)
        typealias APIError = ItemAPIError
        typealias Item = TestItem
        // Sample: begin
        let creation = OfflineCreation<ItemChange>(
            temporaryID: { change in change.createdID },  // .add(id:name:) -> its temporary id
            replacingIDs: { change, serverID in change.replacingIDs(serverID) },
            send: { change, idempotencyKey in api.create(change, idempotencyKey: idempotencyKey) })
        // Sample: end
        withExtendedLifetime(creation) {}
        // Sample: begin
        let changes = try MutationQueue(
            store: items,
            storage: FileMutationStorage<ItemChange>(directory: support.appendingPathComponent("changes")),
            connectivity: connectivity,
            key: { _ in "all" },
            change: { change, list in change.applied(to: list) },
            send: { change, idempotencyKey in api.send(change, idempotencyKey: idempotencyKey) },
            isRefused: { error in (error as? APIError)?.isRefusal == true },
            creation: OfflineCreation(
                temporaryID: { change in change.createdID },
                replacingIDs: { change, serverID in change.replacingIDs(serverID) },
                send: { change, idempotencyKey in api.create(change, idempotencyKey: idempotencyKey) }),
            replacingIDsInValue: { list, serverID in
                list.map { item in Item(id: serverID(item.id) ?? item.id, name: item.name) }
            })
        let temporaryID = "local-\(UUID().uuidString)"
        try changes.enqueue(.add(id: temporaryID, name: "Grace"))  // shown at once, under its temporary id
        try changes.enqueue(.rename(id: temporaryID, name: "Grace H."))  // sent as a rename of the server's id
        // Sample: end
        connectivity.setOnline(true)
        XCTAssertEqual(
            api.sent.withLock { $0 }, [.add(id: temporaryID, name: "Grace"), .rename(id: "s-1", name: "Grace H.")])
        XCTAssertEqual(changes.serverID(for: temporaryID), "s-1")
        let shown = LoadRecorder<StoreResponse<[Item]>>()
        _ = shown.load(items.read("all", policy: .cacheOnly))
        XCTAssertEqual(shown.values.first?.value, [Item(id: "s-1", name: "Grace H.")])
    }

    private func makeDirectory() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("created-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }
}

/// A queue of item changes over a store of a list, with servers whose answers the test gives one by one.
private struct Environment {
    let store = Store<String, [TestItem]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[TestItem]>() })
    let storage: FileMutationStorage<ItemChange>
    let connectivity = ManualConnectivity(isOnline: false)
    let creations = RequestSpy<String>()
    let edits = RequestSpy<Void>()

    init(directory: URL) throws {
        storage = FileMutationStorage(directory: directory)
        store.write([], for: "list")
    }

    func makeQueue(
        onSettled: @escaping @Sendable (SettledMutation<ItemChange>) -> Void = { _ in }
    ) throws -> MutationQueue<String, [TestItem], ItemChange> {
        try makeQueue(storage: storage, onSettled: onSettled)
    }

    /// A queue told how the list names its items when `replacingIDsInValue`; `applying` is told of each change
    /// applied.
    func makeQueue(
        replacingIDsInValue: Bool, applying: @escaping @Sendable () -> Void = {}
    ) throws -> MutationQueue<String, [TestItem], ItemChange> {
        try makeQueue(storage: storage, replacingIDsInValue: replacingIDsInValue, applying: applying)
    }

    func makeQueue(
        storage: some MutationStorage<ItemChange>, replacingIDsInValue: Bool = false,
        applying: @escaping @Sendable () -> Void = {},
        onSettled: @escaping @Sendable (SettledMutation<ItemChange>) -> Void = { _ in }
    ) throws -> MutationQueue<String, [TestItem], ItemChange> {
        let rewrite: @Sendable ([TestItem], (String) -> String?) -> [TestItem] = { $0.replacingIDs($1) }
        return try MutationQueue(
            store: store, storage: storage, connectivity: connectivity, key: { _ in "list" },
            change: { change, list in
                applying()
                return ItemChange.apply(change, to: list)
            },
            send: { [edits] change, _ in edits.send(change) },
            isRefused: { $0 is Refused },
            creation: OfflineCreation(
                temporaryID: \.createdID, replacingIDs: { $0.replacingIDs($1) },
                send: { [creations] change, _ in creations.send(change) }),
            replacingIDsInValue: replacingIDsInValue ? rewrite : nil,
            onSettled: onSettled)
    }

    func shown() -> [TestItem]? {
        let recorder = LoadRecorder<StoreResponse<[TestItem]>>()
        _ = recorder.load(store.read("list", policy: .cacheOnly))
        return recorder.values.first?.value
    }

    func confirmed() -> [TestItem]? {
        let recorder = LoadRecorder<StoreResponse<[TestItem]>>()
        _ = recorder.load(store.read("list", policy: .cacheOnly))
        return recorder.values.first.flatMap { $0.hasPendingChanges ? nil : $0.value }
    }
}

/// A storage whose saves of one mutation wait until the test releases them.
private final class SaveGate: MutationStorage {
    private let storage: FileMutationStorage<ItemChange>
    private let held = Locked<ItemChange?>(nil)
    private let arrived = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    init(_ storage: FileMutationStorage<ItemChange>) {
        self.storage = storage
    }

    func holdSaves(of input: ItemChange) { held.withLock { $0 = input } }
    func waitUntilHeld() { arrived.wait() }
    func release() { released.signal() }

    func loadAll() throws -> [StoredMutation<ItemChange>] { try storage.loadAll() }
    func remove(_ mutation: StoredMutation<ItemChange>) throws { try storage.remove(mutation) }

    func save(_ mutation: StoredMutation<ItemChange>) throws {
        let holds = held.withLock { held in
            guard held == mutation.input else { return false }
            held = nil
            return true
        }
        guard holds else { return try storage.save(mutation) }
        arrived.signal()
        released.wait()
        try storage.save(mutation)
    }
}

/// Requests answered by the test one by one.
private final class RequestSpy<Answer: Sendable>: Sendable {
    private let spy = LoaderSpy<Answer>()
    private let log = Locked<[ItemChange]>([])
    private let answersAtOnce = Locked<(@Sendable (Int) -> Answer)?>(nil)

    var requests: [ItemChange] { log.withLock { $0 } }

    func send(_ change: ItemChange) -> AnyLoader<Answer> {
        AnyLoader { [spy, log, answersAtOnce] completion in
            let count = log.withLock {
                $0.append(change)
                return $0.count
            }
            guard let answer = answersAtOnce.withLock({ $0 }) else { return spy.load(completion: completion) }
            completion(.success(answer(count)))
            return AnyCancellationToken {}
        }
    }

    func answer(_ index: Int, with answer: Answer) { spy.complete(with: answer, at: index) }

    /// Answers each request from now on as it comes: the first with `answer(1)`, the next with `answer(2)`…
    func answerEachAtOnce(with answer: @escaping @Sendable (Int) -> Answer) {
        answersAtOnce.withLock { $0 = answer }
    }
    func refuse(_ index: Int) { spy.fail(with: Refused(), at: index) }
}

extension RequestSpy where Answer == Void {
    func answer(_ index: Int) { answer(index, with: ()) }
}

/// An item of a list.
struct TestItem: Codable, Equatable, Sendable {
    var id: String
    var name: String
}

extension [TestItem] {
    /// The list with each id `serverID` knows replaced.
    func replacingIDs(_ serverID: (String) -> String?) -> [TestItem] {
        map { item in TestItem(id: serverID(item.id) ?? item.id, name: item.name) }
    }
}

/// A change of a list of items, an item created offline named by its temporary id until the server gives its own.
enum ItemChange: Codable, Equatable, Sendable {
    case add(id: String, name: String)
    case rename(id: String, name: String)
    case delete(id: String)

    /// The id of the item the change creates.
    var createdID: String? {
        if case .add(let id, _) = self { id } else { nil }
    }

    // Sample: begin
    /// The change with its item's id replaced, when `serverID` knows it; `nil` when it does not.
    func replacingIDs(_ serverID: (String) -> String?) -> ItemChange? {
        switch self {
        case .add(let id, let name): serverID(id).map { .add(id: $0, name: name) }
        case .rename(let id, let name): serverID(id).map { .rename(id: $0, name: name) }
        case .delete(let id): serverID(id).map { .delete(id: $0) }
        }
    }
    // Sample: end

    /// The list with the change made.
    func applied(to list: [TestItem]?) -> [TestItem]? {
        Self.apply(self, to: list)
    }

    @Sendable static func apply(_ change: ItemChange, to list: [TestItem]?) -> [TestItem]? {
        var list = list ?? []
        switch change {
        case .add(let id, let name):
            list.append(TestItem(id: id, name: name))
        case .rename(let id, let name):
            if let index = list.firstIndex(where: { $0.id == id }) { list[index].name = name }
        case .delete(let id):
            list.removeAll { $0.id == id }
        }
        return list
    }
}

private struct ItemAPIError: Error {
    var isRefusal: Bool { true }
}

/// A server for the samples: it answers at once, creating items as `s-1`, `s-2`…
private final class ItemAPI: Sendable {
    let sent = Locked<[ItemChange]>([])

    func create(_ change: ItemChange, idempotencyKey: String) -> AnyLoader<String> {
        AnyLoader { [sent] completion in
            let count = sent.withLock {
                $0.append(change)
                return $0.count { $0.createdID != nil }
            }
            completion(.success("s-\(count)"))
            return AnyCancellationToken {}
        }
    }

    func send(_ change: ItemChange, idempotencyKey: String) -> AnyLoader<Void> {
        AnyLoader { [sent] completion in
            sent.withLock { $0.append(change) }
            completion(.success(()))
            return AnyCancellationToken {}
        }
    }
}
