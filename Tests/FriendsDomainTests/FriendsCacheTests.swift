import Foundation
import FriendsDomain
import Loading
import LoadingTestSupport
import XCTest

final class FriendsCacheTests: XCTestCase {
    func test_keepsTheKeyedCacheContract_inMemory() {
        verifyContract { InMemoryFriendsStore() }
    }

    func test_keepsTheKeyedCacheContract_onSQLite() {
        verifyContract { SQLiteFriendsStore.inMemory() }
    }

    func test_aLockedOrOtherwiseFailingRead_deletesNothing() {
        let store = BusyStore()
        let resets = Locked(0)
        let cache = FriendsCache(store: store, onReset: { _ in resets.withLock { $0 += 1 } })

        let result: Result<CachedValue<[Friend]>, any Error>? = awaitResult { cache.value(for: .all, completion: $0) }

        XCTAssertThrowsError(try result?.get())
        XCTAssertEqual(store.deleteAllCount, 0, "only a file that is not a readable database is deleted")
        XCTAssertEqual(resets.withLock { $0 }, 0)
    }

    /// The keyed-cache rules that apply to a cache of one key (those about keys not affecting each other do not).
    private func verifyContract(
        file: StaticString = #filePath, line: UInt = #line, _ makeStore: @escaping () -> any FriendsStore
    ) {
        let contract = KeyedCacheContract(keys: (.all, .all), sampleValues: ([makeFriend("1")], [makeFriend("2")])) {
            expiry, now in FriendsCache(store: makeStore(), expiry: expiry, now: now)
        }
        contract.assertAbsentKeyMisses(file: file, line: line)
        contract.assertSavedValueIsReadWithItsSaveDate(file: file, line: line)
        contract.assertRemovingAllEmptiesTheCache(file: file, line: line)
        contract.assertMaxAgeBoundary(file: file, line: line)
        contract.assertExpiredValueIsRemoved(file: file, line: line)
        contract.assertValueStampedInTheFutureIsExpired(file: file, line: line)
        contract.assertExpiryIsReported(file: file, line: line)
    }

    func test_aStoreOverIt_fetchesAgain_onceItExpiredTheValueTheStoreKeeps() {
        let clock = TestClock()
        let cache = FriendsCache(store: InMemoryFriendsStore(), expiry: .maxAge(.seconds(60)), now: { clock.now })
        let network = LoaderSpy<[Friend]>()
        let store = Store<FriendsKey, [Friend]>(
            levels: [.cache(cache, name: "database")], fetch: LoaderFamily { _ in network }, now: { clock.now })
        let first = LoadRecorder<StoreResponse<[Friend]>>()
        _ = first.load(store.read(.all))
        XCTAssertTrue(eventually { network.loadCount == 1 })
        network.complete(with: [makeFriend("1")])
        XCTAssertTrue(eventually { first.count == 1 })

        clock.advance(by: 3_600)
        let again = LoadRecorder<StoreResponse<[Friend]>>()
        _ = again.load(store.read(.all))

        XCTAssertTrue(eventually { network.loadCount == 2 }, "the database expired it: the store fetches again")
        network.complete(with: [makeFriend("2")], at: 1)
        XCTAssertTrue(eventually { again.count == 1 })
        XCTAssertEqual(again.values.first?.value?.map(\.id), ["2"])
    }
}

/// A store whose reads fail as a busy database's would.
private final class BusyStore: FriendsStore {
    private let deletes = Locked(0)
    var deleteAllCount: Int { deletes.withLock { $0 } }

    func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void) {
        completion(.failure(SQLiteError(code: 5, message: "database is locked", operation: "retrieve")))
    }

    func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) { completion(.success(())) }

    func upsert(_ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.success(()))
    }

    func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        deletes.withLock { $0 += 1 }
        completion(.success(()))
    }
}
