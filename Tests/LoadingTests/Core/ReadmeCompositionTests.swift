import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// The composition the README opens with, compiled and run as written there.
final class ReadmeCompositionTests: XCTestCase {
    func test_readmeComposition_loadsFromNetworkOnceAndThenFromMemory() async throws {
        let memory = InMemoryCache<[String]>()
        let database = InMemoryCache<[String]>()
        let remote = AnyLoader<[String]> { ["Ada", "Grace"] }

        // Sample: begin
        let friends =
            memory
            .fallback(to: database.caching(to: memory))
            .fallback(
                to: remote.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
                    .caching(to: database)
                    .caching(to: memory)
            )
            .dispatchOnMainQueue()

        friends.load { result in print(result) }  // callback; returns a token that cancels the load
        let list = try await friends.load()  // async/await; cancelling the Task cancels the load
        // Sample: end

        XCTAssertEqual(list, ["Ada", "Grace"])
        XCTAssertEqual(memory.value, ["Ada", "Grace"], "network results are cached in memory")
        XCTAssertEqual(database.value, ["Ada", "Grace"], "network results are cached in the database")
    }

    func test_readmeComposition_databaseHitIsCachedInMemoryAndNetworkIsNotTouched() {
        let memory = InMemoryCache<[String]>()
        let database = InMemoryCache<[String]>(["Ada"])
        let remote = LoaderSpy<[String]>()
        let friends =
            memory
            .fallback(to: database.caching(to: memory))
            .fallback(
                to: remote.retry(.exponential(initial: .milliseconds(200), maxAttempts: 3))
                    .caching(to: database)
                    .caching(to: memory)
            )
            .dispatchOnMainQueue()

        let delivered = expectation(description: "delivered on main")
        friends.load { result in
            XCTAssertTrue(Thread.isMainThread)
            XCTAssertEqual(try? result.get(), ["Ada"])
            delivered.fulfill()
        }
        wait(for: [delivered], timeout: .watchdog)

        XCTAssertEqual(memory.value, ["Ada"])
        XCTAssertEqual(remote.loadCount, 0)
    }
}
