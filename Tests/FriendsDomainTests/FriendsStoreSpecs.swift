import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import XCTest

/// The contract every `FriendsStore` keeps, run by each store's test case (`makeSUT` gives a fresh store).
protocol FriendsStoreSpecs: XCTestCase {
    func makeSUT() -> any FriendsStore
}

extension FriendsStoreSpecs {
    func assertRetrieveDeliversNothingOnEmptyStore(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        XCTAssertEqual(try retrieve(sut)?.get(), .some(nil), file: file, line: line)
    }

    func assertRetrieveHasNoSideEffectsOnEmptyStore(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = retrieve(sut)
        XCTAssertEqual(try retrieve(sut)?.get(), .some(nil), file: file, line: line)
    }

    func assertRetrieveDeliversWhatWasInserted(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        let friends = [makeFriend("1"), makeFriend("2", status: .away)]
        XCTAssertNoThrow(try replaceAll(sut, friends)?.get(), file: file, line: line)
        XCTAssertEqual(
            try retrieve(sut)?.get(), CachedFriends(friends: friends, timestamp: fixedDate), file: file, line: line)
    }

    func assertRetrieveHasNoSideEffectsOnNonEmptyStore(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        let friends = [makeFriend("1")]
        _ = replaceAll(sut, friends)
        _ = retrieve(sut)
        XCTAssertEqual(
            try retrieve(sut)?.get(), CachedFriends(friends: friends, timestamp: fixedDate), file: file, line: line)
    }

    func assertInsertReplacesPreviousValues(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = replaceAll(sut, [makeFriend("1"), makeFriend("2")])
        let later = fixedDate.addingTimeInterval(60)
        XCTAssertNoThrow(try replaceAll(sut, [makeFriend("3")], timestamp: later)?.get(), file: file, line: line)
        XCTAssertEqual(
            try retrieve(sut)?.get(), CachedFriends(friends: [makeFriend("3")], timestamp: later), file: file,
            line: line)
    }

    func assertInsertKeepsOneFriendPerIDLastOccurrenceWinning(
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let sut = makeSUT()
        let list = [makeFriend("1", name: "A"), makeFriend("2"), makeFriend("1", name: "B"), makeFriend("3")]
        XCTAssertNoThrow(try replaceAll(sut, list)?.get(), file: file, line: line)
        XCTAssertEqual(
            try retrieve(sut)?.get()?.friends, [makeFriend("1", name: "B"), makeFriend("2"), makeFriend("3")],
            file: file, line: line)
    }

    func assertUpsertReplacesByIDInPlaceAndAppendsUnknownIDs(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = replaceAll(sut, [makeFriend("1"), makeFriend("2"), makeFriend("3")])
        let renamed = makeFriend("2", name: "Renamed", status: .offline, updatedAt: 1_700_000_100)
        let later = fixedDate.addingTimeInterval(5)
        XCTAssertNoThrow(try upsert(sut, renamed, timestamp: later)?.get(), file: file, line: line)
        XCTAssertNoThrow(try upsert(sut, makeFriend("4"), timestamp: later)?.get(), file: file, line: line)
        XCTAssertEqual(
            try retrieve(sut)?.get(),
            CachedFriends(friends: [makeFriend("1"), renamed, makeFriend("3"), makeFriend("4")], timestamp: later),
            file: file, line: line)
    }

    func assertUpsertOnEmptyStoreCreatesList(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = upsert(sut, makeFriend("1"))
        XCTAssertEqual(try retrieve(sut)?.get()?.friends, [makeFriend("1")], file: file, line: line)
    }

    func assertDeleteRemovesOnlyThatFriend(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = replaceAll(sut, [makeFriend("1"), makeFriend("2")])
        XCTAssertNoThrow(try delete(sut, "1")?.get(), file: file, line: line)
        XCTAssertNoThrow(try delete(sut, "unknown")?.get(), file: file, line: line)
        XCTAssertEqual(try retrieve(sut)?.get()?.friends, [makeFriend("2")], file: file, line: line)
    }

    func assertDeleteAllEmptiesStore(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        _ = replaceAll(sut, [makeFriend("1")])
        XCTAssertNoThrow(try deleteAll(sut)?.get(), file: file, line: line)
        XCTAssertEqual(try retrieve(sut)?.get(), .some(nil), file: file, line: line)
    }

    func assertDeleteAllOnEmptyStoreSucceeds(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        XCTAssertNoThrow(try deleteAll(sut)?.get(), file: file, line: line)
        XCTAssertEqual(try retrieve(sut)?.get(), .some(nil), file: file, line: line)
    }

    func assertApplyChangesOnlyWhatItNames(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        let (a, b, c) = (makeFriend("a"), makeFriend("b"), makeFriend("c"))
        _ = replaceAll(sut, [a, b, c])
        let renamedB = makeFriend("b", name: "Renamed elsewhere")
        _ = upsert(sut, renamedB)  // another writer's change, which this saver never read
        let changes = FriendsChanges(from: [a, b, c], to: [c, makeFriend("d")])  // a and b deleted, d added

        let applied = awaitResult { sut.apply(changes, timestamp: fixedDate.addingTimeInterval(1), completion: $0) }

        XCTAssertNotNil(try applied?.get(), file: file, line: line)
        let stored = try? retrieve(sut)?.get()
        XCTAssertEqual(stored?.friends, [c, makeFriend("d")], file: file, line: line)
        XCTAssertEqual(stored?.timestamp, fixedDate.addingTimeInterval(1), file: file, line: line)
        let moved = FriendsChanges(from: [c, makeFriend("d")], to: [makeFriend("d"), c])
        _ = awaitResult { sut.apply(moved, timestamp: fixedDate, completion: $0) }
        XCTAssertEqual(try? retrieve(sut)?.get()?.friends, [makeFriend("d"), c], "moved", file: file, line: line)
    }

    func assertApplyLeavesRowsItDoesNotNameAsTheyAre(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        let (a, b) = (makeFriend("a"), makeFriend("b"))
        _ = replaceAll(sut, [a, b])
        let renamedB = makeFriend("b", name: "Renamed elsewhere")
        _ = upsert(sut, renamedB)  // another writer's change

        _ = awaitResult { sut.apply(FriendsChanges(from: [a, b], to: [b]), timestamp: fixedDate, completion: $0) }

        XCTAssertEqual(
            try? retrieve(sut)?.get()?.friends, [renamedB], "b moved, but kept the other writer's change", file: file,
            line: line)
    }

    func assertOperationsRunInOrder(file: StaticString = #filePath, line: UInt = #line) {
        let sut = makeSUT()
        let order = Locked<[Int]>([])
        let done = expectation(description: "all done")
        done.expectedFulfillmentCount = 3
        sut.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in
            order.withLock { $0.append(1) }
            done.fulfill()
        }
        sut.deleteAll { _ in
            order.withLock { $0.append(2) }
            done.fulfill()
        }
        sut.replaceAll(with: [makeFriend("3")], timestamp: fixedDate) { _ in
            order.withLock { $0.append(3) }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        XCTAssertEqual(order.withLock { $0 }, [1, 2, 3], file: file, line: line)
        XCTAssertEqual(try retrieve(sut)?.get()?.friends, [makeFriend("3")], file: file, line: line)
    }

    // MARK: - Helpers

    func retrieve(_ sut: any FriendsStore) -> Result<CachedFriends?, any Error>? {
        awaitResult { sut.retrieve(completion: $0) }
    }

    func replaceAll(_ sut: any FriendsStore, _ friends: [Friend], timestamp: Date = fixedDate) -> Result<
        Void, any Error
    >? {
        awaitResult { sut.replaceAll(with: friends, timestamp: timestamp, completion: $0) }
    }

    func upsert(_ sut: any FriendsStore, _ friend: Friend, timestamp: Date = fixedDate) -> Result<Void, any Error>? {
        awaitResult { sut.upsert(friend, timestamp: timestamp, completion: $0) }
    }

    func delete(_ sut: any FriendsStore, _ id: String) -> Result<Void, any Error>? {
        awaitResult { sut.delete(id: id, completion: $0) }
    }

    func deleteAll(_ sut: any FriendsStore) -> Result<Void, any Error>? {
        awaitResult { sut.deleteAll(completion: $0) }
    }
}
