import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// A shared level that records the store's changes of it in a journal, for the other processes over the level.
final class JournalingLevelTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = try makeTemporaryFolder("journaling")
    }

    private var file: URL { directory.appendingPathComponent("changes.journal") }

    private func key(_ text: String) -> Data { Data(text.utf8) }

    private func makeStore(
        shared: some KeyedCache<String, String>, journal: ChangeJournal, failures: Locked<[String]> = Locked([])
    ) -> Store<String, String> {
        let level = StoreLevel.cache(shared, name: "shared").journaling(
            to: journal, encodeKey: { $0 == "unencodable" ? nil : Data($0.utf8) },
            onFailure: { error in failures.withLock { $0.append("\(error)") } }
        ).level
        return Store(
            levels: [.cache(MemoryCache<String, String>(), name: "memory"), level],
            fetch: LoaderFamily { (id: String) in
                AnyLoader<String> { completion in
                    completion(.success("fetched \(id)"))
                    return AnyCancellationToken {}
                }
            })
    }

    func test_aWriteARemovalAndAClear_areRecorded_inOrder_onceTheLevelHoldsThem() throws {
        let shared = MemoryCache<String, String>()
        let store = makeStore(shared: shared, journal: try ChangeJournal(file: file))
        let otherProcess = try ChangeJournal(file: file)

        store.write("Ada", for: "u1")
        store.remove("u2")
        let cleared = expectation(description: "cleared")
        store.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)

        var learnt: [ChangeJournal.Change] = []
        XCTAssertTrue(
            eventually {
                learnt += otherProcess.readChanges()
                return learnt.count >= 3
            })
        XCTAssertEqual(learnt, [.saved(key("u1")), .removed(key("u2")), .cleared])
    }

    func test_aFetchedValue_isRecordedToo() throws {
        let store = makeStore(shared: MemoryCache<String, String>(), journal: try ChangeJournal(file: file))
        let otherProcess = try ChangeJournal(file: file)

        let read = expectation(description: "read")
        store.read("u3").load { _ in read.fulfill() }
        wait(for: [read], timeout: .watchdog)

        XCTAssertTrue(eventually { otherProcess.readChanges() == [.saved(key("u3"))] })
    }

    func test_aFailedSave_andAKeyThatCannotBeEncoded_recordNothing() throws {
        let failures = Locked<[String]>([])
        let store = makeStore(shared: SavesFail(), journal: try ChangeJournal(file: file), failures: failures)
        let otherProcess = try ChangeJournal(file: file)

        store.write("Ada", for: "u1")
        store.write("Grace", for: "unencodable")
        let flushed = expectation(description: "flushed")
        store.flush { flushed.fulfill() }
        wait(for: [flushed], timeout: .watchdog)

        XCTAssertEqual(otherProcess.readChanges(), [])
        XCTAssertEqual(failures.withLock { $0 }, [], "nothing failed to append: nothing was to be appended")
    }
}

/// A cache whose saves fail; its other operations do nothing and succeed.
private struct SavesFail: KeyedCache {
    func value(for key: String, completion: @escaping @Sendable (Result<CachedValue<String>, any Error>) -> Void) {
        completion(.failure(CacheMiss.absent))
    }
    func save(_ value: String, for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(CocoaError(.fileWriteOutOfSpace)))
    }
    func removeValue(for key: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }
}
