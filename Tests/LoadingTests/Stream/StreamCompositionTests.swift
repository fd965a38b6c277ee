import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

private let received = Locked<[[StreamCompositionTests.Friend]]>([])
private let renderedOnMain = Locked(true)

/// What the README's sample renders.
private func render(_ list: [StreamCompositionTests.Friend]) {
    if !Thread.isMainThread { renderedOnMain.withLock { $0 = false } }
    received.withLock { $0.append(list) }
}

/// The README's stream composition: memory, else the database (cached to memory),
/// else the network (cached to both), merged with live updates that replace a friend by id and are cached to both,
/// delivered on the main queue.
final class StreamCompositionTests: XCTestCase {
    struct Friend: Equatable, Sendable {
        let id: String
        var name: String
    }

    func test_seedComposition_loadsFromNetworkCachesBothAndMergesLiveUpdates() {
        received.withLock { $0 = [] }
        let memory = InMemoryCache<[Friend]>()
        let database = InMemoryCache<[Friend]>()
        let network = LoaderSpy<[Friend]>()
        let updates = StreamSubject<Friend, Never>()

        // Sample: begin
        let friends = memory.asStream()
            .fallback(to: database.asStream().caching(to: memory))
            .fallback(
                to: network.asStream()
                    .caching(to: database)
                    .caching(to: memory)
            )
            .merge(
                with: updates.stream
                    .setFailureType(to: (any Error).self)
                    .flatMap { friend in
                        memory.asStream().map { list in
                            list.map { $0.id == friend.id ? friend : $0 }
                        }
                    }
                    .caching(to: memory)
                    .caching(to: database)
            )
            .receive(on: .main)

        let subscription = friends.sink { _ in
        } receiveValue: { list in
            render(list)
        }
        // Sample: end

        let ada = Friend(id: "1", name: "Ada")
        let grace = Friend(id: "2", name: "Grace")
        XCTAssertEqual(network.loadCount, 1, "memory and database missed, so the network is asked")
        DispatchQueue.global().async { network.complete(with: [ada, grace]) }
        spinMainQueue { received.withLock { $0.count } == 1 }
        XCTAssertEqual(memory.value, [ada, grace])
        XCTAssertEqual(database.value, [ada, grace])

        let renamed = Friend(id: "2", name: "Grace Hopper")
        DispatchQueue.global().async { updates.send(renamed) }
        spinMainQueue { received.withLock { $0.count } == 2 }

        XCTAssertEqual(received.withLock { $0 }, [[ada, grace], [ada, renamed]])
        XCTAssertEqual(memory.value, [ada, renamed], "the updated list is cached in memory")
        XCTAssertEqual(database.value, [ada, renamed], "and in the database")
        XCTAssertTrue(renderedOnMain.withLock { $0 })
        subscription.cancel()
    }

    func test_seedComposition_memoryHitTouchesNeitherDatabaseNorNetwork() {
        let ada = Friend(id: "1", name: "Ada")
        let memory = InMemoryCache<[Friend]>([ada])
        let database = LoaderSpy<[Friend]>()
        let network = LoaderSpy<[Friend]>()
        let friends = memory.asStream()
            .fallback(to: database.asStream().caching(to: memory))
            .fallback(to: network.asStream().caching(to: memory))

        let recorder = StreamRecorder(friends.mapError { $0 as? TestError ?? TestError(id: -1) })

        XCTAssertEqual(recorder.values, [[ada]])
        XCTAssertEqual(database.loadCount + network.loadCount, 0)
    }

}
