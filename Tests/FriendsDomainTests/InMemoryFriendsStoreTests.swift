import FriendsDomain
import XCTest

final class InMemoryFriendsStoreTests: XCTestCase, FriendsStoreSpecs {
    func makeSUT() -> any FriendsStore {
        InMemoryFriendsStore()
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
