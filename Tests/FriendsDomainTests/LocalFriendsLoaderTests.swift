import Foundation
import FriendsDomain
import Loading
import LoadingTestSupport
import XCTest

final class LocalFriendsLoaderTests: XCTestCase {
    func test_load_failsWithEmptyWhenNothingIsStored() {
        let (sut, _) = makeSUT()
        guard case .failure(LocalFriendsLoader.Error.empty)? = awaitResult({ sut.load(completion: $0) }) else {
            return XCTFail("expected .empty")
        }
    }

    func test_load_deliversFreshFriendsIncludingASavedEmptyList() throws {
        let (sut, store) = makeSUT(maxAge: .seconds(60), now: fixedDate.addingTimeInterval(59))
        store.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        XCTAssertEqual(try awaitResult { sut.load(completion: $0) }?.get(), [makeFriend("1")])

        store.replaceAll(with: [], timestamp: fixedDate) { _ in }
        XCTAssertEqual(try awaitResult { sut.load(completion: $0) }?.get(), [])
    }

    func test_load_failsWithExpiredOnceMaxAgeHasPassed() {
        let (sut, store) = makeSUT(maxAge: .seconds(60), now: fixedDate.addingTimeInterval(60))
        store.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        guard case .failure(LocalFriendsLoader.Error.expired(let savedAt))? = awaitResult({ sut.load(completion: $0) })
        else {
            return XCTFail("expected .expired")
        }
        XCTAssertEqual(savedAt, fixedDate)
    }

    func test_load_failsWithExpired_whenFriendsWereSavedWithTheClockAhead() {
        // Saved a day "in the future" (the clock was ahead), read now: expired, not fresh for a day.
        let (sut, store) = makeSUT(maxAge: .seconds(60), now: fixedDate)
        store.replaceAll(with: [makeFriend("1")], timestamp: fixedDate.addingTimeInterval(86_400)) { _ in }
        guard case .failure(LocalFriendsLoader.Error.expired)? = awaitResult({ sut.load(completion: $0) }) else {
            return XCTFail("expected .expired")
        }
    }

    func test_load_neverExpiresWithoutMaxAge() throws {
        let (sut, store) = makeSUT(maxAge: nil, now: fixedDate.addingTimeInterval(10 * 365 * 86_400))
        store.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        XCTAssertEqual(try awaitResult { sut.load(completion: $0) }?.get(), [makeFriend("1")])
    }

    func test_load_deliversStoreErrors() {
        let sut = LocalFriendsLoader(store: FailingStore())
        guard case .failure(let error)? = awaitResult({ sut.load(completion: $0) }) else { return XCTFail() }
        XCTAssertTrue(error is AnyError)
    }

    func test_save_replacesStoredFriendsStampedWithCurrentDate() throws {
        let (sut, store) = makeSUT(now: fixedDate)
        _ = awaitResult { sut.save([makeFriend("2")], completion: $0) }
        XCTAssertEqual(
            try awaitResult { store.retrieve(completion: $0) }?.get(),
            CachedFriends(friends: [makeFriend("2")], timestamp: fixedDate))
    }

    func test_keepsTheCacheContract_onBothStores() {
        CacheContract(sampleValues: ([makeFriend("1")], [makeFriend("2"), makeFriend("3")])) {
            let loader = LocalFriendsLoader(store: InMemoryFriendsStore())
            return (cache: loader, reader: loader)
        }.verify()
        CacheContract(sampleValues: ([makeFriend("1")], [makeFriend("2"), makeFriend("3")])) {
            let loader = LocalFriendsLoader(store: SQLiteFriendsStore.inMemory())
            return (cache: loader, reader: loader)
        }.verify()
    }

    func test_validateCache_deletesExpiredDataAndKeepsFreshData() throws {
        let store = InMemoryFriendsStore()
        store.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        let fresh = LocalFriendsLoader(
            store: store, maxAge: .seconds(60), currentDate: { fixedDate.addingTimeInterval(30) })
        _ = awaitResult { fresh.validateCache(completion: $0) }
        XCTAssertNotNil(try awaitResult { store.retrieve(completion: $0) }?.get())

        let expired = LocalFriendsLoader(
            store: store, maxAge: .seconds(60), currentDate: { fixedDate.addingTimeInterval(61) })
        _ = awaitResult { expired.validateCache(completion: $0) }
        XCTAssertEqual(try awaitResult { store.retrieve(completion: $0) }?.get(), .some(nil))
    }

    func test_validateCache_deletesUnreadableData() {
        let store = FailingStore()
        _ = awaitResult { LocalFriendsLoader(store: store).validateCache(completion: $0) }
        XCTAssertEqual(store.deleteAllCount, 1)
    }

    func test_cancelledLoad_neverCompletes() {
        let store = SlowStore(wrapping: InMemoryFriendsStore())
        let sut = LocalFriendsLoader(store: store)
        let completed = Locked(false)
        sut.load { _ in completed.withLock { $0 = true } }.cancel()
        store.answerReads()  // the read answers after the cancel
        XCTAssertFalse(completed.withLock { $0 })
    }

    private func makeSUT(maxAge: Duration? = nil, now: Date = fixedDate) -> (LocalFriendsLoader, InMemoryFriendsStore) {
        let store = InMemoryFriendsStore()
        return (LocalFriendsLoader(store: store, maxAge: maxAge, currentDate: { now }), store)
    }
}

/// A store whose reads always fail, counting the deletions asked of it.
final class FailingStore: FriendsStore {
    private let deletions = Locked(0)
    var deleteAllCount: Int { deletions.withLock { $0 } }

    func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void) {
        completion(.failure(AnyError()))
    }
    func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        completion(.failure(AnyError()))
    }
    func upsert(_ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(AnyError()))
    }
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        completion(.failure(AnyError()))
    }
    func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        deletions.withLock { $0 += 1 }
        completion(.success(()))
    }
}

/// A store whose reads answer when the test says so (``answerReads()``), until it lets every read go
/// (``stopHoldingReads()``); its writes go through at once.
final class SlowStore: FriendsStore {
    let wrapping: any FriendsStore
    /// The reads held, or `nil` once reads are no longer held.
    private let reads = Locked<[@Sendable (Result<CachedFriends?, any Error>) -> Void]?>([])

    init(wrapping: any FriendsStore) {
        self.wrapping = wrapping
    }

    /// How many reads wait.
    var heldReads: Int { reads.withLock { $0?.count ?? 0 } }

    func retrieve(completion: @escaping @Sendable (Result<CachedFriends?, any Error>) -> Void) {
        let isHeld = reads.withLock { reads -> Bool in
            reads?.append(completion)
            return reads != nil
        }
        if !isHeld { wrapping.retrieve(completion: completion) }
    }

    /// Answers the reads asked so far, here.
    func answerReads() {
        let held = reads.withLock { reads in
            defer { if reads != nil { reads = [] } }
            return reads ?? []
        }
        for read in held { wrapping.retrieve(completion: read) }
    }

    /// Answers the reads asked so far, and every later one at once.
    func stopHoldingReads() {
        answerReads()
        let late = reads.withLock { reads in
            defer { reads = nil }
            return reads ?? []
        }
        for read in late { wrapping.retrieve(completion: read) }
    }

    func replaceAll(
        with friends: [Friend], timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        wrapping.replaceAll(with: friends, timestamp: timestamp, completion: completion)
    }
    func upsert(_ friend: Friend, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        wrapping.upsert(friend, timestamp: timestamp, completion: completion)
    }
    func delete(id: Friend.ID, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        wrapping.delete(id: id, completion: completion)
    }
    func deleteAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        wrapping.deleteAll(completion: completion)
    }
    func apply(
        _ changes: FriendsChanges, timestamp: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        wrapping.apply(changes, timestamp: timestamp, completion: completion)
    }
}
