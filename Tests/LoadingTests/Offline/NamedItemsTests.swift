import XCTest

@testable import Loading

/// The items a queue's mutations name: which mutations name an item, and the server ids given, bounded.
final class NamedItemsTests: XCTestCase {
    func test_theMutationsNamingAnItem_followItsNewID_andLeaveWithTheirMutation() {
        var items = NamedItems()
        items.add("m1", naming: ["local-1"])
        items.add("m2", naming: ["local-1", "u7"])

        items.rename("m2", from: "local-1", to: "s1")
        items.remove("m1", naming: ["local-1"])

        XCTAssertEqual(items.mutations(naming: "local-1"), [])
        XCTAssertEqual(items.mutations(naming: "s1"), ["m2"])
        XCTAssertEqual(items.mutations(naming: "u7"), ["m2"])
    }

    func test_theServerIDsKept_areTheMostRecent_andEachCountsAVersion() {
        var items = NamedItems()
        for number in 0...NamedItems.serverIDLimit {
            items.assign("s\(number)", to: "local-\(number)")
        }

        XCTAssertNil(items.serverID(for: "local-0"), "the oldest is forgotten past the limit")
        XCTAssertEqual(items.serverID(for: "local-1"), "s1")
        XCTAssertEqual(items.known.count, NamedItems.serverIDLimit)
        XCTAssertEqual(items.version, NamedItems.serverIDLimit + 1)
    }

    func test_aLogout_forgetsEverything_andCountsAVersion() {
        var items = NamedItems()
        items.add("m1", naming: ["local-1"])
        items.assign("s1", to: "local-1")
        let version = items.version

        items.removeAll()

        XCTAssertEqual(items.mutations(naming: "local-1"), [])
        XCTAssertNil(items.serverID(for: "local-1"))
        XCTAssertGreaterThan(items.version, version, "an enqueue that read the ids before rewrites its input again")
    }
}
