import Loading
import LoadingTestSupport
import XCTest

/// Every composite, once its load completed or was cancelled, keeps nothing alive: not the completion, not what
/// the completion holds.
final class CompositeLifecycleTests: XCTestCase {
    private let composites: [(name: String, make: @Sendable (LoaderSpy<Int>) -> AnyLoader<Int>)] = [
        ("fallback", { AnyLoader($0.fallback(to: LoaderSpy<Int>())) }),
        ("caching", { AnyLoader($0.caching(to: CacheSpy<Int>())) }),
        ("caching(.failLoad)", { AnyLoader($0.caching(to: CacheSpy<Int>(), policy: .failLoad)) }),
        ("retry", { AnyLoader($0.retry(.immediate(maxAttempts: 2), scheduler: .immediate)) }),
        ("receive(on:)", { AnyLoader($0.receive(on: .immediate)) }),
        ("timeout", { AnyLoader($0.timeout(after: .seconds(5), scheduler: TestScheduler())) }),
        ("map", { AnyLoader($0.map { $0 + 1 }) }),
        ("mapError", { AnyLoader($0.mapError { $0 }) }),
        ("handleEvents", { AnyLoader($0.handleEvents(onStart: {}, onValue: { _ in }, onCancel: {})) }),
        ("AnyLoader(callback)", { spy in AnyLoader { completion in spy.load(completion: completion) } }),
    ]

    func test_everyComposite_releasesTheCompletionAfterCompletion() {
        for (name, make) in composites {
            let spy = LoaderSpy<Int>()
            weak var weakMarker: LeakMarker?
            do {
                let marker = LeakMarker()
                weakMarker = marker
                make(spy).load { _ in marker.touch() }
            }
            spy.complete(with: 1)
            XCTAssertNil(weakMarker, "\(name) keeps its completion after completing")
        }
    }

    func test_everyComposite_releasesTheCompletionAtCancel() {
        for (name, make) in composites {
            let spy = LoaderSpy<Int>()
            weak var weakMarker: LeakMarker?
            let token: any CancellationToken
            do {
                let marker = LeakMarker()
                weakMarker = marker
                token = make(spy).load { _ in marker.touch() }
            }
            token.cancel()
            XCTAssertNil(weakMarker, "\(name) keeps its completion after a cancel")
            XCTAssertEqual(spy.cancelledRequests, [0], "\(name) did not cancel its upstream")
        }
    }
}
