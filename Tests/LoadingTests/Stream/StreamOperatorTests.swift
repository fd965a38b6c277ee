import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

final class StreamOperatorTests: XCTestCase {
    typealias Subject = StreamSubject<Int, TestError>

    func test_map_transformsValuesAndPassesCompletion() {
        let subject = Subject()
        let recorder = StreamRecorder(subject.stream.map { $0 * 10 })
        subject.send(1)
        subject.send(2)
        subject.send(completion: .finished)
        XCTAssertEqual(recorder.events, [.value(10), .value(20), .completion(.finished)])
    }

    func test_tryMap_thrownErrorFailsStreamAndCancelsUpstream() {
        let subject = Subject()
        let upstreamCancelled = Locked(false)
        let recorder = StreamRecorder(
            subject.stream
                .handleEvents(receiveCancel: { upstreamCancelled.withLock { $0 = true } })
                .tryMap { value -> Int in
                    if value == 2 { throw TestError(id: 2) }
                    return value
                })
        subject.send(1)
        subject.send(2)
        subject.send(3)

        XCTAssertEqual(recorder.values, [1])
        XCTAssertEqual(
            (recorder.completion.flatMap { if case .failure(let e) = $0 { return e } else { return nil } })
                as? TestError, TestError(id: 2))
        XCTAssertTrue(upstreamCancelled.withLock { $0 })
    }

    func test_mapError_transformsFailure() {
        let recorder = StreamRecorder(
            EventStream<Int, TestError>.fail(TestError(id: 1)).mapError { TestError(id: $0.id + 1) })
        XCTAssertEqual(recorder.events, [.completion(.failure(TestError(id: 2)))])
    }

    func test_compactMapAndFilter_dropValues() {
        let source = EventStream<Int, TestError>.sequence(1...6)
        XCTAssertEqual(StreamRecorder(source.compactMap { $0.isMultiple(of: 2) ? $0 * 10 : nil }).values, [20, 40, 60])
        XCTAssertEqual(StreamRecorder(source.filter { $0 > 4 }).events, [.value(5), .value(6), .completion(.finished)])
    }

    func test_replaceError_sendsReplacementThenFinishes() {
        let recorder = StreamRecorder(EventStream<Int, TestError>.fail(anyError).replaceError(with: 0))
        XCTAssertEqual(recorder.events, [.value(0), .completion(.finished)])
    }

    func test_first_sendsFirstValueFinishesAndCancelsUpstream() {
        let subject = Subject()
        let upstreamCancelled = Locked(false)
        let recorder = StreamRecorder(
            subject.stream.handleEvents(receiveCancel: { upstreamCancelled.withLock { $0 = true } }).first())
        subject.send(7)
        subject.send(8)
        XCTAssertEqual(recorder.events, [.value(7), .completion(.finished)])
        XCTAssertTrue(upstreamCancelled.withLock { $0 })
    }

    func test_first_finishesWithoutValueWhenUpstreamDoes() {
        XCTAssertEqual(StreamRecorder(EventStream<Int, TestError>.empty().first()).events, [.completion(.finished)])
    }

    func test_removeDuplicates_sendsOnlyChanges() {
        let recorder = StreamRecorder(
            EventStream<Int, TestError>.sequence([1, 1, 2, 2, 2, 1, 3, 3]).removeDuplicates())
        XCTAssertEqual(recorder.values, [1, 2, 1, 3])
    }

    func test_handleEvents_runsEachCallbackBeforeDownstreamSeesTheEvent() {
        let log = Locked<[String]>([])
        let stream = EventStream<Int, TestError>.sequence([1])
            .handleEvents(
                receiveSubscription: { log.withLock { $0.append("subscription") } },
                receiveOutput: { value in log.withLock { $0.append("hook \(value)") } },
                receiveCompletion: { _ in log.withLock { $0.append("hook completion") } },
                receiveCancel: { log.withLock { $0.append("cancel") } })
        _ = StreamRecorder(stream) { event in
            log.withLock { $0.append(event.isCompletion ? "sink completion" : "sink value") }
        }
        XCTAssertEqual(
            log.withLock { $0 },
            ["subscription", "hook 1", "sink value", "hook completion", "sink completion"])
    }

    func test_handleEvents_reportsCancelOnlyWhenCancelledBeforeCompletion() {
        let cancels = Locked(0)
        let subject = Subject()
        let stream = subject.stream.handleEvents(receiveCancel: { cancels.withLock { $0 += 1 } })
        let cancelled = StreamRecorder(stream)
        cancelled.cancel()
        cancelled.cancel()
        let completed = StreamRecorder(stream)
        subject.send(completion: .finished)
        completed.cancel()
        XCTAssertEqual(cancels.withLock { $0 }, 1)
    }

    func test_catch_switchesToFallbackAfterValuesOfTheFailedStream() {
        let primary = Subject()
        let fallback = Subject()
        let recorder = StreamRecorder(primary.stream.catch { _ in fallback.stream })
        primary.send(1)
        primary.send(completion: .failure(anyError))
        fallback.send(2)
        fallback.send(completion: .finished)
        XCTAssertEqual(recorder.events, [.value(1), .value(2), .completion(.finished)])
    }

    func test_catch_cancelBeforeSwitchNeverSubscribesFallback() {
        let primary = Subject()
        let subscribed = Locked(false)
        let recorder = StreamRecorder(
            primary.stream.catch { _ in
                subscribed.withLock { $0 = true }
                return EventStream<Int, TestError>.just(9)
            })
        recorder.cancel()
        primary.send(completion: .failure(anyError))
        XCTAssertFalse(subscribed.withLock { $0 })
        XCTAssertEqual(recorder.events, [])
    }

    func test_catch_cancelAfterSwitchCancelsFallback() {
        let primary = Subject()
        let fallback = Subject()
        let fallbackCancelled = Locked(false)
        let recorder = StreamRecorder(
            primary.stream.catch { _ in
                fallback.stream.handleEvents(receiveCancel: { fallbackCancelled.withLock { $0 = true } })
            })
        primary.send(completion: .failure(anyError))
        recorder.cancel()
        fallback.send(1)
        XCTAssertTrue(fallbackCancelled.withLock { $0 })
        XCTAssertEqual(recorder.events, [])
    }

    func test_retry_resubscribesDeferredWorkUntilSuccess() {
        let attempts = Locked(0)
        let stream = EventStream<Int, TestError>.deferred {
            let attempt = attempts.withLock { attempts -> Int in
                attempts += 1
                return attempts
            }
            return attempt < 3 ? .fail(TestError(id: attempt)) : .just(attempt)
        }
        XCTAssertEqual(StreamRecorder(stream.retry(2)).events, [.value(3), .completion(.finished)])
        attempts.withLock { $0 = 0 }
        XCTAssertEqual(StreamRecorder(stream.retry(1)).events, [.completion(.failure(TestError(id: 2)))])
    }

    func test_retry_ofABareFutureReplaysItsFailure() {
        let runs = Locked(0)
        let future = EventStream<Int, TestError>.future { promise in
            runs.withLock { $0 += 1 }
            promise(.failure(TestError(id: 1)))
        }
        XCTAssertEqual(StreamRecorder(future.retry(3)).events, [.completion(.failure(TestError(id: 1)))])
        XCTAssertEqual(runs.withLock { $0 }, 1, "the future's work ran once; retry only replayed its failure")
    }

    func test_retryWithPolicy_waitsBackoffOnSchedulerAndCancelStopsIt() {
        let scheduler = TestScheduler()
        let attempts = Locked(0)
        let stream = EventStream<Int, TestError>.deferred {
            attempts.withLock { $0 += 1 }
            return .fail(anyError)
        }
        let recorder = StreamRecorder(
            stream.retry(.exponential(initial: .milliseconds(100), maxAttempts: 4), scheduler: scheduler))
        XCTAssertEqual(attempts.withLock { $0 }, 1)
        scheduler.advance(by: .milliseconds(100))
        XCTAssertEqual(attempts.withLock { $0 }, 2)
        scheduler.advance(by: .milliseconds(199))
        XCTAssertEqual(attempts.withLock { $0 }, 2)
        scheduler.advance(by: .milliseconds(1))
        XCTAssertEqual(attempts.withLock { $0 }, 3)
        recorder.cancel()
        scheduler.run()
        XCTAssertEqual(attempts.withLock { $0 }, 3)
        XCTAssertEqual(scheduler.scheduledDelays, [.milliseconds(100), .milliseconds(200), .milliseconds(400)])
        XCTAssertEqual(recorder.events, [])
    }

    func test_receiveOn_deliversOnlyWhenSchedulerRunsAndCancelDropsWaitingEvents() {
        let scheduler = TestScheduler()
        let subject = Subject()
        let recorder = StreamRecorder(subject.stream.receive(on: scheduler))
        subject.send(1)
        XCTAssertEqual(recorder.events, [])
        scheduler.advance()
        XCTAssertEqual(recorder.values, [1])
        subject.send(2)
        recorder.cancel()
        scheduler.advance()
        XCTAssertEqual(recorder.values, [1])
    }

    func test_receiveOn_concurrentQueueStillDeliversInOrderWithoutOverlap() {
        let done = expectation(description: "finished")
        let recorder = StreamRecorder(
            EventStream<Int, TestError>.sequence(0..<2_000).receive(on: .global())
        ) { if $0.isCompletion { done.fulfill() } }
        wait(for: [done], timeout: .watchdog)
        XCTAssertEqual(recorder.values, Array(0..<2_000))
        XCTAssertEqual(recorder.overlappingDeliveries, 0)
    }

    func test_debounce_sendsLastValueOfABurstAfterQuietInterval() {
        let scheduler = TestScheduler()
        let subject = Subject()
        let recorder = StreamRecorder(subject.stream.debounce(for: .milliseconds(500), scheduler: scheduler))
        for value in 1...5 {
            subject.send(value)
            scheduler.advance(by: .milliseconds(100))
        }
        XCTAssertEqual(recorder.values, [])
        scheduler.advance(by: .milliseconds(400))
        XCTAssertEqual(recorder.values, [5])
        subject.send(6)
        scheduler.advance(by: .milliseconds(500))
        XCTAssertEqual(recorder.values, [5, 6])
    }

    func test_debounce_flushesWaitingValueOnFinish() {
        let scheduler = TestScheduler()
        let subject = Subject()
        let recorder = StreamRecorder(subject.stream.debounce(for: .seconds(1), scheduler: scheduler))
        subject.send(1)
        subject.send(completion: .finished)
        XCTAssertEqual(recorder.events, [.value(1), .completion(.finished)])
        scheduler.run()
        XCTAssertEqual(recorder.events.count, 2)
    }

    func test_debounce_failureDropsWaitingValue_andCancelStopsTimer() {
        let scheduler = TestScheduler()
        let subject = Subject()
        let failed = StreamRecorder(subject.stream.debounce(for: .seconds(1), scheduler: scheduler))
        subject.send(1)
        subject.send(completion: .failure(anyError))
        XCTAssertEqual(failed.events, [.completion(.failure(anyError))])

        let other = Subject()
        let cancelled = StreamRecorder(other.stream.debounce(for: .seconds(1), scheduler: scheduler))
        other.send(1)
        cancelled.cancel()
        scheduler.run()
        XCTAssertEqual(cancelled.events, [])
        XCTAssertEqual(scheduler.pendingCount, 0)
    }

    func test_merge_finishesWhenAllFinish() {
        let a = Subject()
        let b = Subject()
        let recorder = StreamRecorder(a.stream.merge(with: b.stream))
        a.send(1)
        b.send(2)
        a.send(completion: .finished)
        XCTAssertNil(recorder.completion)
        b.send(3)
        b.send(completion: .finished)
        XCTAssertEqual(recorder.events, [.value(1), .value(2), .value(3), .completion(.finished)])
    }

    func test_merge_firstFailureIsDeliveredAtOnceAndCancelsTheOthers() {
        let a = Subject()
        let b = Subject()
        let c = Subject()
        let cancelled = Locked<[String]>([])
        let recorder = StreamRecorder(
            EventStream.merge([
                a.stream,
                b.stream.handleEvents(receiveCancel: { cancelled.withLock { $0.append("b") } }),
                c.stream.handleEvents(receiveCancel: { cancelled.withLock { $0.append("c") } }),
            ]))
        a.send(1)
        b.send(completion: .failure(TestError(id: 5)))
        c.send(2)
        XCTAssertEqual(recorder.events, [.value(1), .completion(.failure(TestError(id: 5)))])
        XCTAssertEqual(cancelled.withLock { $0 }, ["c"])
    }

    func test_merge_ofNothingFinishes() {
        XCTAssertEqual(StreamRecorder(EventStream<Int, TestError>.merge([])).events, [.completion(.finished)])
    }

    func test_flatMap_mergesInnerStreamsAndFinishesWhenAllFinish() {
        let outer = Subject()
        let inners = [Subject(), Subject()]
        let recorder = StreamRecorder(outer.stream.flatMap { inners[$0].stream })
        outer.send(0)
        outer.send(1)
        inners[1].send(10)
        inners[0].send(20)
        outer.send(completion: .finished)
        inners[0].send(completion: .finished)
        XCTAssertNil(recorder.completion)
        inners[1].send(completion: .finished)
        XCTAssertEqual(recorder.events, [.value(10), .value(20), .completion(.finished)])
    }

    func test_flatMap_innerFailureFailsAndCancelsEverything() {
        let outer = Subject()
        let inner = Subject()
        let outerCancelled = Locked(false)
        let recorder = StreamRecorder(
            outer.stream.handleEvents(receiveCancel: { outerCancelled.withLock { $0 = true } })
                .flatMap { _ in inner.stream })
        outer.send(0)
        inner.send(completion: .failure(TestError(id: 3)))
        outer.send(1)
        XCTAssertEqual(recorder.events, [.completion(.failure(TestError(id: 3)))])
        XCTAssertTrue(outerCancelled.withLock { $0 })
    }
}
