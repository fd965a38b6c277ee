import LoadingTestSupport
import XCTest

@testable import Loading

/// The same three checks on every operator: values then a failure arrive as the operator says; a cancel in the
/// middle stops delivery at once and cancels the upstream; nothing arrives after the terminal event.
final class StreamOperatorContractTests: XCTestCase {
    typealias Events = [StreamEvent<Int, TestError>]

    /// An operator, and the events it should turn `1, 2, 3, failure(9)` into.
    private let operators:
        [(
            name: String, apply: @Sendable (EventStream<Int, TestError>) -> EventStream<Int, TestError>,
            expected: Events
        )] = [
            (
                "map", { $0.map { $0 * 10 } },
                [.value(10), .value(20), .value(30), .completion(.failure(TestError(id: 9)))]
            ),
            ("filter", { $0.filter { $0 != 2 } }, [.value(1), .value(3), .completion(.failure(TestError(id: 9)))]),
            (
                "compactMap", { $0.compactMap { $0 == 1 ? nil : $0 } },
                [.value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "mapError", { $0.mapError { TestError(id: $0.id + 1) } },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 10)))]
            ),
            (
                "removeDuplicates", { $0.map { $0 / 2 }.removeDuplicates() },
                [.value(0), .value(1), .completion(.failure(TestError(id: 9)))]
            ),
            ("scan", { $0.scan(0, +) }, [.value(1), .value(3), .value(6), .completion(.failure(TestError(id: 9)))]),
            (
                "handleEvents", { $0.handleEvents(receiveOutput: { _ in }) },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "catch", { $0.catch { _ in .just(99) } },
                [.value(1), .value(2), .value(3), .value(99), .completion(.finished)]
            ),
            ("retry(0)", { $0.retry(0) }, [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]),
            (
                "merge", { $0.merge(with: .empty()) },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "flatMap", { $0.flatMap { .just($0 + 100) } },
                [.value(101), .value(102), .value(103), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "receive(on: .immediate)", { $0.receive(on: .immediate) },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "concat", { $0.concat(.just(8)) },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "prepend", { $0.prepend(0) },
                [.value(0), .value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
            (
                "retry(.max) over a failing source", { $0.catch { _ in .just(5) }.retry(.max) },
                [.value(1), .value(2), .value(3), .value(5), .completion(.finished)]
            ),
            ("first", { $0.first() }, [.value(1), .completion(.finished)]),
            ("first(where:)", { $0.first { $0 > 1 } }, [.value(2), .completion(.finished)]),
            (
                "fallback", { $0.fallback(to: .just(7)) },
                [.value(1), .value(2), .value(3), .value(7), .completion(.finished)]
            ),
            (
                "tryMap", { $0.tryMap { $0 }.mapError { $0 as? TestError ?? TestError(id: -1) } },
                [.value(1), .value(2), .value(3), .completion(.failure(TestError(id: 9)))]
            ),
        ]

    func test_everyOperator_passesValuesAndTerminalEventAsDocumented() {
        for (name, apply, expected) in operators {
            let subject = StreamSubject<Int, TestError>()
            let recorder = StreamRecorder(apply(subject.stream))
            for value in 1...3 { subject.send(value) }
            subject.send(completion: .failure(TestError(id: 9)))
            XCTAssertEqual(recorder.events, expected, name)
        }
    }

    func test_everyOperator_cancelStopsDeliveryAtOnceAndCancelsUpstream() {
        for (name, apply, _) in operators where !name.hasPrefix("first") {
            let subject = StreamSubject<Int, TestError>()
            let upstreamCancelled = Locked(false)
            let recorder = StreamRecorder(
                apply(subject.stream.handleEvents(receiveCancel: { upstreamCancelled.withLock { $0 = true } })))
            subject.send(1)
            let before = recorder.events.count
            recorder.cancel()
            subject.send(2)
            subject.send(completion: .finished)

            XCTAssertEqual(recorder.events.count, before, "\(name) delivered after cancel")
            XCTAssertTrue(upstreamCancelled.withLock { $0 }, "\(name) did not cancel its upstream")
        }
    }

    func test_everyOperator_deliversNothingAfterTheTerminalEvent() {
        for (name, apply, _) in operators {
            // A misbehaving source that keeps sending after its terminal event.
            let source = EventStream<Int, TestError> { observer in
                observer.send(1)
                observer.fail(TestError(id: 9))
                observer.send(2)
                observer.finish()
            }
            let recorder = StreamRecorder(apply(source))
            let terminals = recorder.events.filter(\.isCompletion).count
            XCTAssertEqual(terminals, 1, "\(name): exactly one terminal event")
            XCTAssertTrue(recorder.events.last?.isCompletion == true, "\(name): nothing after the terminal event")
        }
    }
}
