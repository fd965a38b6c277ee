import LoadingTestSupport
import XCTest

@testable import Loading

/// After a subscription finishes, fails or is cancelled, nothing it made stays alive: every operator is checked by
/// watching an object captured by the subscriber while the source (a subject) lives on.
final class StreamLifecycleTests: XCTestCase {
    typealias Subject = StreamSubject<Int, TestError>

    private let operators: [(String, @Sendable (EventStream<Int, TestError>) -> EventStream<Int, TestError>)] = [
        ("map", { $0.map { $0 } }),
        ("filter", { $0.filter { _ in true } }),
        ("compactMap", { $0.compactMap { $0 } }),
        ("mapError", { $0.mapError { $0 } }),
        ("removeDuplicates", { $0.removeDuplicates() }),
        ("handleEvents", { $0.handleEvents(receiveOutput: { _ in }, receiveCancel: {}) }),
        ("catch", { $0.catch { _ in .empty() } }),
        ("retry", { $0.retry(1) }),
        ("merge", { $0.merge(with: .empty(completeImmediately: false)) }),
        ("flatMap", { $0.flatMap { .just($0) } }),
        ("receive(on:)", { $0.receive(on: .immediate) }),
        ("debounce", { $0.debounce(for: .seconds(1), scheduler: .immediate) }),
        ("first", { $0.first() }),
    ]

    func test_everyOperator_releasesSubscriberAfterCancel() {
        for (name, apply) in operators {
            let subject = Subject()
            weak var weakMarker: Marker?
            var subscription: StreamSubscription?
            do {
                let marker = Marker()
                weakMarker = marker
                subscription = apply(subject.stream).sink(
                    receiveCompletion: { _ in marker.touch() }, receiveValue: { _ in marker.touch() })
            }
            subject.send(1)
            subscription?.cancel()
            subscription = nil
            XCTAssertNil(weakMarker, "\(name) retains its subscriber after cancel")
        }
    }

    func test_everyOperator_releasesSubscriberAfterFinishAndFailure() {
        for (name, apply) in operators {
            for completion in [StreamCompletion<TestError>.finished, .failure(anyError)] {
                let subject = Subject()
                weak var weakMarker: Marker?
                var subscription: StreamSubscription?
                do {
                    let marker = Marker()
                    weakMarker = marker
                    subscription = apply(subject.stream).sink(
                        receiveCompletion: { _ in marker.touch() }, receiveValue: { _ in marker.touch() })
                }
                subject.send(completion: completion)
                XCTAssertNil(weakMarker, "\(name) retains its subscriber after \(completion)")
                if case .failure = completion {
                    XCTAssertEqual(subscription?.isActive, false, "\(name) did not pass the failure on")
                }
                subscription = nil
            }
        }
    }
}
