import Foundation
import FriendsDomain
import XCTest

/// The store specs against an SQLite file, a fresh temporary file per test.
final class SQLiteFileFriendsStoreTests: XCTestCase, FriendsStoreSpecs {
    func makeSUT() -> any FriendsStore {
        let url = temporaryFileURL()
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        return SQLiteFriendsStore(fileURL: url)
    }

    func test_retrieveDeliversNothingOnEmptyStore() {
        assertRetrieveDeliversNothingOnEmptyStore()
    }

    func test_retrieveHasNoSideEffectsOnEmptyStore() {
        assertRetrieveHasNoSideEffectsOnEmptyStore()
    }

    func test_retrieveDeliversWhatWasInserted() {
        assertRetrieveDeliversWhatWasInserted()
    }

    func test_retrieveHasNoSideEffectsOnNonEmptyStore() {
        assertRetrieveHasNoSideEffectsOnNonEmptyStore()
    }

    func test_insertReplacesPreviousValues() {
        assertInsertReplacesPreviousValues()
    }

    func test_upsertReplacesByIDInPlaceAndAppendsUnknownIDs() {
        assertUpsertReplacesByIDInPlaceAndAppendsUnknownIDs()
    }

    func test_upsertOnEmptyStoreCreatesList() {
        assertUpsertOnEmptyStoreCreatesList()
    }

    func test_deleteRemovesOnlyThatFriend() {
        assertDeleteRemovesOnlyThatFriend()
    }

    func test_deleteAllEmptiesStore() {
        assertDeleteAllEmptiesStore()
    }

    func test_deleteAllOnEmptyStoreSucceeds() {
        assertDeleteAllOnEmptyStoreSucceeds()
    }

    func test_applyChangesOnlyWhatItNames() {
        assertApplyChangesOnlyWhatItNames()
    }

    func test_applyLeavesRowsItDoesNotNameAsTheyAre() {
        assertApplyLeavesRowsItDoesNotNameAsTheyAre()
    }

    func test_operationsRunInOrder() {
        assertOperationsRunInOrder()
    }

    func test_insertKeepsOneFriendPerID() {
        assertInsertKeepsOneFriendPerIDLastOccurrenceWinning()
    }
}

/// The store specs against an in-memory SQLite database.
final class SQLiteInMemoryFriendsStoreTests: XCTestCase, FriendsStoreSpecs {
    func makeSUT() -> any FriendsStore {
        SQLiteFriendsStore.inMemory()
    }

    func test_retrieveDeliversNothingOnEmptyStore() {
        assertRetrieveDeliversNothingOnEmptyStore()
    }

    func test_retrieveHasNoSideEffectsOnEmptyStore() {
        assertRetrieveHasNoSideEffectsOnEmptyStore()
    }

    func test_retrieveDeliversWhatWasInserted() {
        assertRetrieveDeliversWhatWasInserted()
    }

    func test_retrieveHasNoSideEffectsOnNonEmptyStore() {
        assertRetrieveHasNoSideEffectsOnNonEmptyStore()
    }

    func test_insertReplacesPreviousValues() {
        assertInsertReplacesPreviousValues()
    }

    func test_upsertReplacesByIDInPlaceAndAppendsUnknownIDs() {
        assertUpsertReplacesByIDInPlaceAndAppendsUnknownIDs()
    }

    func test_upsertOnEmptyStoreCreatesList() {
        assertUpsertOnEmptyStoreCreatesList()
    }

    func test_deleteRemovesOnlyThatFriend() {
        assertDeleteRemovesOnlyThatFriend()
    }

    func test_deleteAllEmptiesStore() {
        assertDeleteAllEmptiesStore()
    }

    func test_deleteAllOnEmptyStoreSucceeds() {
        assertDeleteAllOnEmptyStoreSucceeds()
    }

    func test_applyChangesOnlyWhatItNames() {
        assertApplyChangesOnlyWhatItNames()
    }

    func test_applyLeavesRowsItDoesNotNameAsTheyAre() {
        assertApplyLeavesRowsItDoesNotNameAsTheyAre()
    }

    func test_operationsRunInOrder() {
        assertOperationsRunInOrder()
    }

    func test_insertKeepsOneFriendPerID() {
        assertInsertKeepsOneFriendPerIDLastOccurrenceWinning()
    }
}
