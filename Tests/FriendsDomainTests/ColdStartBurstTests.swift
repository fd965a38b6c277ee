import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A burst of loads of the friends list on a cold start (nothing in memory nor in the database) goes to the network
/// once, however the loads interleave with the answer.
final class ColdStartBurstTests: XCTestCase {
    func test_aBurstOfLoadsOnAnEmptyStore_fetchesOnce_everyRound() {
        for round in 0..<scaled(200, floor: 20) {
            let network = CountingNetwork()
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("burst-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let composer = FriendsComposer(
                memoryStore: InMemoryFriendsStore(),
                databaseStore: SQLiteFriendsStore(fileURL: folder.appendingPathComponent("friends.sqlite")),
                remote: network.loader, maxAge: .seconds(300))
            let answered = Locked(0)
            let loads = 2_000
            DispatchQueue.concurrentPerform(iterations: loads) { _ in
                _ = composer.friendsLoader.load { _ in answered.withLock { $0 += 1 } }
            }
            spinMainQueue(until: { answered.withLock { $0 } == loads })
            XCTAssertEqual(network.count, 1, "round \(round): the burst fetched \(network.count) times")
            if network.count != 1 { return }
        }
    }
}

/// A network that answers each fetch at once, on another thread, counting them.
private final class CountingNetwork: Sendable {
    private let fetches = Locked(0)

    var count: Int { fetches.withLock { $0 } }

    var loader: AnyLoader<[Friend]> {
        AnyLoader { [fetches] completion in
            fetches.withLock { $0 += 1 }
            DispatchQueue.global().async { completion(.success([makeFriend("1")])) }
            return AnyCancellationToken {}
        }
    }
}
