import Foundation
import LoadingTestSupport
import XCTest

@testable import Loading

/// The real ``PagedStore`` a page history runs on: one memory level, a server whose page requests wait until the
/// history answers them, and an observer of every key from the start. It records what ``PageModel`` does.
final class PagedStoreUnderTest: ModelCheck.System {
    typealias List = PagedList<Int, Int>

    /// A page request waiting for the server.
    private struct Waiting: Sendable {
        let id: Int
        let key: String
        let cursor: Int?
        let completion: LoadCompletion<Page<Int, Int>>
    }

    private let waiting = Locked<[Waiting]>([])
    private let level = ModelLevel<List>(clock: TestClock())
    private let pages: PagedStore<String, Int, Int>
    private var server = PageServer()
    private let observers: [String: StreamRecorder<StoreResponse<List>, Never>]
    private let answers = Locked<[Int: [PageAnswer]]>([:])
    private var callerCount = 0
    private var tokens: [Int: any CancellationToken] = [:]

    init(maxPages: Int?, bothWays: Bool = false) {
        server.bothWays = bothWays
        let waiting = waiting
        let requestCount = Locked(0)
        let pages = PagedStore(levels: [.cache(level, name: "memory")], maxPages: maxPages) { key, cursor in
            AnyLoader { completion in
                let id = requestCount.withLock { count in
                    count += 1
                    return count
                }
                waiting.withLock { $0.append(Waiting(id: id, key: key, cursor: cursor, completion: completion)) }
                // A cancelled request never answers.
                return AnyCancellationToken { waiting.withLock { $0.removeAll { $0.id == id } } }
            }
        }
        self.pages = pages
        observers = Dictionary(
            uniqueKeysWithValues: ModelCheck.keys.map { ($0, StreamRecorder(pages.store.changes(for: $0))) })
    }

    deinit {
        // Requests left waiting fail, so that nothing holds the store after the history.
        while let request = waiting.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            request.completion(.failure(TestError.model))
        }
    }

    func apply(_ step: PageStep) {
        server.apply(step)
        switch step {
        case .loadNextPage(let key):
            let caller = newCaller()
            tokens[caller] = pages.nextPage(of: key).load { [answers] result in
                answers.withLock { $0[caller]!.append(PageAnswer(result)) }
            }
        case .loadPreviousPage(let key):
            let caller = newCaller()
            tokens[caller] = pages.previousPage(of: key).load { [answers] result in
                answers.withLock { $0[caller]!.append(PageAnswer(result)) }
            }
        case .refresh(let key):
            let caller = newCaller()
            tokens[caller] = pages.store.freshValue(of: key).load { [answers] result in
                answers.withLock { $0[caller]!.append(PageAnswer(result)) }
            }
        case .answer(let index):
            guard let request = take(index) else { return }
            let page = server.page(of: request.key, at: request.cursor)
            request.completion(
                .success(Page(items: page.items, nextCursor: page.next, previousCursor: page.previous)))
        case .fail(let index):
            take(index)?.completion(.failure(TestError.model))
        case .liveInsert(let key, let index, let number):
            pages.store.update(key) { list in
                list?.updatingPage(holding: index) { items in items = Array(Set(items + [number])).sorted() }
            }
        case .liveInsertWhile(let key, let index, let number, let during):
            let store = pages.store
            ModelCheck.whileAChangeRuns { hold in
                store.update(key) { list in
                    hold()
                    return list?.updatingPage(holding: index) { items in items = Array(Set(items + [number])).sorted() }
                }
            } during: {
                apply(during)
            }
        case .cancel(let caller): tokens[caller]?.cancel()
        case .remove(let key): pages.store.remove(key)
        case .clear: pages.store.clear()
        case .serverInserts, .serverHasPages: break
        }
    }

    var checkpoint: PageCheckpoint {
        var checkpoint = PageCheckpoint()
        for (key, recorder) in observers {
            checkpoint.shown[key] = recorder.values.last?.value.map(\.modelPages)
        }
        checkpoint.level = level.contents.mapValues(\.modelPages)
        checkpoint.answers = answers.withLock { $0 }
        checkpoint.waiting = waiting.withLock { $0 }.map { "\($0.key)@\($0.cursor.map(String.init) ?? "first")" }
        return checkpoint
    }

    private func newCaller() -> Int {
        callerCount += 1
        answers.withLock { [callerCount] in $0[callerCount] = [] }
        return callerCount
    }

    private func take(_ index: Int) -> Waiting? {
        waiting.withLock { $0.indices.contains(index) ? $0.remove(at: index) : nil }
    }
}

extension PagedList<Int, Int> {
    var modelPages: [ModelPage] {
        pages.map {
            ModelPage(
                cursor: $0.cursor, items: $0.page.items, next: $0.page.nextCursor, previous: $0.page.previousCursor,
                isPrevious: $0.isPrevious)
        }
    }
}

extension PageAnswer {
    init(_ result: Result<StoreResponse<PagedList<Int, Int>>, any Error>) {
        switch result {
        case .success(let response): self = .list(response.value?.modelPages, withError: response.error != nil)
        case .failure: self = .failed
        }
    }
}

extension ModelCheck {
    /// Runs a page history on the real paged store and on ``PageModel``, both keeping at most `maxPages`, over a
    /// server that opens its lists in the middle when `bothWays`.
    static func run(
        _ history: [PageStep], maxPages: Int?, bothWays: Bool = false
    ) -> Disagreement<PageStep, PageCheckpoint>? {
        run(
            history, model: { PageModel(maxPages: maxPages, bothWays: bothWays) },
            system: { PagedStoreUnderTest(maxPages: maxPages, bothWays: bothWays) })
    }

    /// Fails the test when `history` disagrees with the paged store's model, saying where and how.
    static func assertPagesAgree(
        _ history: [PageStep], maxPages: Int? = nil, bothWays: Bool = false, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        if let disagreement = run(history, maxPages: maxPages, bothWays: bothWays) {
            XCTFail("\(disagreement)", file: file, line: line)
        }
    }

    /// A random page history of `length` steps from `seed`, made with the model at hand so that its answers name
    /// requests that wait; with `bothWays`, previous pages are loaded too.
    static func pageHistory(seed: UInt64, length: Int, maxPages: Int?, bothWays: Bool = false) -> [PageStep] {
        var random = SeededRandom(seed: seed)
        var model = PageModel(maxPages: maxPages, bothWays: bothWays)
        var steps: [PageStep] = []
        while steps.count < length {
            let key = keys.randomElement(using: &random)!
            let step: PageStep
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<25:
                step = bothWays && Bool.random(using: &random) ? .loadPreviousPage(key) : .loadNextPage(key)
            case 25..<35: step = .refresh(key)
            case 35..<70:
                guard !model.requests.isEmpty else { continue }
                let request = Int.random(in: 0..<model.requests.count, using: &random)
                step = Int.random(in: 0..<6, using: &random) == 0 ? .fail(request: request) : .answer(request: request)
            case 70..<80:
                step = .serverInserts(
                    key, page: Int.random(in: 0..<4, using: &random), Int.random(in: 0..<50, using: &random))
            case 80..<84: step = .serverHasPages(key, count: Int.random(in: 1...5, using: &random))
            case 84..<91:
                step = .liveInsert(
                    key, index: Int.random(in: 0..<8, using: &random), 100 + Int.random(in: 0..<20, using: &random))
            case 91..<94:
                // Something else comes for the key while a live change of it runs.
                var during: [PageStep] = [.loadNextPage(key), .refresh(key), .remove(key), .clear]
                if !model.requests.isEmpty {
                    during.append(.answer(request: Int.random(in: 0..<model.requests.count, using: &random)))
                }
                if model.callerCount > 0 {
                    during.append(.cancel(caller: Int.random(in: 1...model.callerCount, using: &random)))
                }
                step = .liveInsertWhile(
                    key, index: Int.random(in: 0..<8, using: &random), 100 + Int.random(in: 0..<20, using: &random),
                    during: during.randomElement(using: &random)!)
            case 94..<97 where model.callerCount > 0:
                step = .cancel(caller: Int.random(in: 1...model.callerCount, using: &random))
            case 97..<99: step = .remove(key)
            default: step = .clear
            }
            model.apply(step)
            steps.append(step)
        }
        return steps
    }
}
