import Loading
import LoadingTestSupport
import XCTest

final class CacheContractTests: XCTestCase {
    func test_inMemoryCache_keepsTheCacheContract() {
        CacheContract(sampleValues: ([1, 2], [3])) {
            let cache = InMemoryCache<[Int]>()
            return (cache: cache, reader: cache)
        }.verify()
    }

}
