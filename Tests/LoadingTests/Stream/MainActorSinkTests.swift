import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// A `@MainActor` screen binds to a stream and calls its own methods, with no `assumeIsolated` in its code.
@MainActor
final class MainActorSinkTests: XCTestCase {
    @MainActor
    private final class Screen {
        var rendered: [String] = []
        var ended = false
        var subscription: StreamSubscription?
        let onRender: () -> Void

        init(onRender: @escaping () -> Void) {
            self.onRender = onRender
        }

        func bind(to lists: EventStream<String, Never>) {
            subscription = lists.sink(on: .main) { [weak self] _ in
                self?.ended = true
            } receiveValue: { [weak self] value in
                self?.render(value)
            }
        }

        func render(_ value: String) {
            rendered.append(value)
            onRender()
        }
    }

    func test_sinkOnMain_runsItsClosuresOnTheMainActor_forEventsSentFromAnyThread() async {
        let subject = StreamSubject<String, Never>()
        let two = expectation(description: "two renders")
        two.expectedFulfillmentCount = 2
        let screen = Screen { two.fulfill() }
        screen.bind(to: subject.stream)

        DispatchQueue.global().async { subject.send("from a background thread") }
        subject.send("from main")
        await fulfillment(of: [two], timeout: .watchdog)

        XCTAssertEqual(Set(screen.rendered), ["from a background thread", "from main"])
        subject.send(completion: .finished)
        await Task.yield()
    }

    func test_sinkOnMain_deliversNothingAfterCancel() async {
        let subject = StreamSubject<String, Never>()
        let screen = Screen {}
        screen.bind(to: subject.stream)

        screen.subscription?.cancel()
        subject.send("late")
        // A delivery would be a main-queue block sent before this one: once this one ran, it would have too.
        await withCheckedContinuation { continuation in DispatchQueue.main.async { continuation.resume() } }

        XCTAssertEqual(screen.rendered, [])
    }
}

final class AnyCacheAsyncTests: XCTestCase {
    private actor QuoteStore {
        private(set) var saved: [Int] = []

        func save(_ value: Int) async throws {
            if value == 3 { throw TestError(id: 3) }
            for _ in 0..<Int.random(in: 0...3) { await Task.yield() }  // saves take turns with other work
            saved.append(value)
        }
    }

    func test_anActorIsACache_andItsSavesKeepTheirOrder() async {
        let store = QuoteStore()
        let cache = AnyCache<Int> { value in try await store.save(value) }
        let outcomes = Locked<[Int: Bool]>([:])
        let done = expectation(description: "every save completed")
        done.expectedFulfillmentCount = 10

        for value in 0..<10 {
            cache.save(value) { result in
                outcomes.withLock { $0[value] = (try? result.get()) != nil }
                done.fulfill()
            }
        }
        await fulfillment(of: [done], timeout: .watchdog)

        let saved = await store.saved
        XCTAssertEqual(saved, [0, 1, 2, 4, 5, 6, 7, 8, 9], "in order, the failed one left out")
        XCTAssertEqual(outcomes.withLock { $0[3] }, false)
    }
}
