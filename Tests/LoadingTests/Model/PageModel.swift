/// A step of a paged store's history: the app's calls (load the next or the previous page, refresh, a live change,
/// remove, clear), the server's answers to the page requests waiting (in any order), and the server's pages changing.
enum PageStep: Hashable, Sendable, CustomStringConvertible {
    case loadNextPage(String)
    /// The page before the list's first (a server that opens its lists in the middle gives previous cursors).
    case loadPreviousPage(String)
    /// The store's fetch of the key: its loaded pages again (``Store/refresh(_:)``).
    case refresh(String)
    /// The server answers the request waiting at `request` (in the order they were made) with its page now.
    case answer(request: Int)
    case fail(request: Int)
    /// The server's page `page` of the key gains `number`.
    case serverInserts(String, page: Int, Int)
    /// The server's list of the key has `count` pages now.
    case serverHasPages(String, count: Int)
    /// A live change through the store: `number` joins the page that holds the item at `index`.
    case liveInsert(String, index: Int, Int)
    /// A live change (as ``liveInsert(_:index:_:)``) runs while `during` happens (a page answers, a load or a refresh
    /// is asked, the key is removed, the store cleared, a caller cancels): as when it comes from another thread.
    indirect case liveInsertWhile(String, index: Int, Int, during: PageStep)
    /// Caller `caller` (a next-page load or a refresh, by the order they were asked) cancels its load.
    case cancel(caller: Int)
    case remove(String)
    case clear

    var description: String {
        switch self {
        case .loadNextPage(let key): ".loadNextPage(\"\(key)\")"
        case .loadPreviousPage(let key): ".loadPreviousPage(\"\(key)\")"
        case .refresh(let key): ".refresh(\"\(key)\")"
        case .answer(let request): ".answer(request: \(request))"
        case .fail(let request): ".fail(request: \(request))"
        case .serverInserts(let key, let page, let number): ".serverInserts(\"\(key)\", page: \(page), \(number))"
        case .serverHasPages(let key, let count): ".serverHasPages(\"\(key)\", count: \(count))"
        case .liveInsert(let key, let index, let number): ".liveInsert(\"\(key)\", index: \(index), \(number))"
        case .liveInsertWhile(let key, let index, let number, let during):
            ".liveInsertWhile(\"\(key)\", index: \(index), \(number), during: \(during))"
        case .cancel(let caller): ".cancel(caller: \(caller))"
        case .remove(let key): ".remove(\"\(key)\")"
        case .clear: ".clear"
        }
    }

    /// Simpler forms of this step, for shrinking: the request or caller it names by a smaller number.
    var simpler: [PageStep] {
        switch self {
        case .answer(let request) where request > 0: [.answer(request: request - 1), .answer(request: 0)]
        case .fail(let request) where request > 0: [.fail(request: request - 1), .fail(request: 0)]
        case .cancel(let caller) where caller > 1: [.cancel(caller: caller - 1), .cancel(caller: 1)]
        case .liveInsertWhile(let key, let index, let number, let during):
            [.liveInsert(key, index: index, number), during]
                + during.simpler.map { .liveInsertWhile(key, index: index, number, during: $0) }
        default: []
        }
    }
}

/// A page as the model sees it: the cursor it was loaded with (a page number; `nil` for the first), its items, its
/// next cursor, its previous one (from a server that gives them), and whether it was loaded as a previous page.
struct ModelPage: Hashable, CustomStringConvertible {
    let cursor: Int?
    var items: [Int]
    let next: Int?
    var previous: Int? = nil
    var isPrevious = false

    var description: String {
        "\(isPrevious ? "↑" : "")\(previous.map { "\($0)←" } ?? "")\(cursor.map(String.init) ?? "first"):\(items)"
            + (next.map { "→\($0)" } ?? ".")
    }

    /// Whether `page` is this one, as a refresh compares them: by the page alone, or by the cursor it was loaded with
    /// too (`byCursor`).
    func isSame(as page: ModelPage, byCursor: Bool) -> Bool {
        items == page.items && next == page.next && previous == page.previous && (!byCursor || cursor == page.cursor)
    }
}

/// The server of a page history: a few pages per key, each a few numbers; page `n`'s cursor is `n`. One that
/// opens its lists in the middle (`bothWays`) answers the first page with its second (when it has two), and gives
/// each page the cursor of the one before.
struct PageServer {
    private var pages: [String: [[Int]]] = [:]
    var bothWays = false

    /// Page `cursor` (the first when `nil`) of `key`, as the server has it now: an empty last page past its end.
    func page(of key: String, at cursor: Int?) -> ModelPage {
        let pages = pages[key] ?? Self.initial
        let index = cursor ?? (bothWays && pages.count > 1 ? 1 : 0)
        guard index < pages.count else { return ModelPage(cursor: cursor, items: [], next: nil) }
        return ModelPage(
            cursor: cursor, items: pages[index], next: index + 1 < pages.count ? index + 1 : nil,
            previous: bothWays && index > 0 ? index - 1 : nil)
    }

    /// Applies the server's side of `step`.
    mutating func apply(_ step: PageStep) {
        switch step {
        case .serverInserts(let key, let page, let number):
            var pages = pages[key] ?? Self.initial
            guard page < pages.count else { return }
            pages[page] = Array(Set(pages[page] + [number])).sorted()
            self.pages[key] = pages
        case .serverHasPages(let key, let count):
            let pages = pages[key] ?? Self.initial
            self.pages[key] = (0..<max(1, count)).map { $0 < pages.count ? pages[$0] : [$0 * 10, $0 * 10 + 1] }
        default: break
        }
    }

    private static let initial = (0..<3).map { [$0 * 10, $0 * 10 + 1] }
}

/// What a page history left: what each key's observer was last shown, what the level holds, what each caller was
/// answered, and which page requests wait for the server, in order.
struct PageCheckpoint: Equatable, CustomStringConvertible {
    var shown: [String: [ModelPage]] = [:]
    var level: [String: [ModelPage]] = [:]
    var answers: [Int: [PageAnswer]] = [:]
    var waiting: [String] = []

    var description: String {
        """
        shown \(shown.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        level \(level.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        answers \(answers.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" })
        waiting \(waiting)
        """
    }
}

/// What a caller of a paged store was answered: a list (or none), with whether an error came with it; or a failure.
enum PageAnswer: Hashable, CustomStringConvertible {
    case list([ModelPage]?, withError: Bool)
    case failed

    var description: String {
        switch self {
        case .list(let pages, let withError): "\(pages.map { "\($0)" } ?? "nil")\(withError ? " + error" : "")"
        case .failed: "failed"
        }
    }
}

/// What a ``PagedStore`` promises, plainly: per key the list the store shows, the changes made since the oldest fetch
/// in flight began (a fetch applies them again to what it brings), the refresh walks in flight, and the one shared
/// next-page load per key; the requests waiting, in order. Every key is observed throughout, so the store holds it,
/// and its one level (a memory level whose saves succeed) holds what it shows.
///
/// - Loading the next page: when the key shows no list, a cache-first read of the store, which fetches the first
///   page (joining a fetch in flight); when the list has no next page, the list at once; else the page at the
///   list's next cursor, appended once it arrives, unless the list's last page changed meanwhile (then the list is
///   left as it is). Calls made while one is under way share it, and its answer.
/// - A refresh (the store's fetch) loads the pages shown when it began, from the first one's cursor: each fresh page
///   replaces the page it stands for; the first one equal to it ends the walk, which keeps the pages after it;
///   otherwise it goes on until it loaded as many pages as there were, or a page has no next one. A page that fails
///   fails the refresh and changes nothing. A fetch that ends after a later one was confirmed confirms nothing; one
///   overtaken by a removal or a clear neither.
struct PageModel: ModelCheck.System {
    enum Change: Hashable {
        /// The page appended after `before`, the list's last page when its request went out.
        case append(ModelPage, after: ModelPage?)
        /// The page prepended before `after`, the list's first page when its request went out.
        case prepend(ModelPage, before: ModelPage?)
        case liveInsert(index: Int, Int)
    }

    enum Caller: Hashable {
        case refresh(Int)
        /// The next-page (or previous-page, `before`) load of the key, waiting for the store's read of its first page.
        case load(before: Bool)
    }

    struct Fetch: Hashable {
        let id: Int
        let generation: Int
        let logStart: Int
        let old: [ModelPage]
        var fresh: [ModelPage] = []
        var callers: [Caller]
    }

    struct Logged: Hashable {
        let sequence: Int
        let change: Change
    }

    struct Key {
        var list: [ModelPage]?
        var generation = 0
        var log: [Logged] = []
        var logSequence = 0
        var fetches: [Fetch] = []
        var lastConfirmedFetch = 0
        /// The callers of the next-page (`false`) and previous-page (`true`) loads under way.
        var loadCallers: [Bool: [Int]] = [:]
    }

    enum Purpose: Hashable {
        case append(after: ModelPage?)
        case prepend(before: ModelPage?)
        case walk(fetch: Int)
    }

    struct Request: Hashable {
        let key: String
        let cursor: Int?
        let purpose: Purpose

        /// Whether it loads a page to add before the list's first (`before`) or after its last.
        func adds(before: Bool) -> Bool {
            switch purpose {
            case .append: !before
            case .prepend: before
            case .walk: false
            }
        }
    }

    let maxPages: Int?
    private var server = PageServer()
    private var keys: [String: Key] = Dictionary(uniqueKeysWithValues: ModelCheck.keys.map { ($0, Key()) })
    private(set) var requests: [Request] = []
    private var answers: [Int: [PageAnswer]] = [:]
    private(set) var callerCount = 0
    private var fetchCount = 0

    init(maxPages: Int?, bothWays: Bool = false) {
        self.maxPages = maxPages
        server.bothWays = bothWays
    }

    var checkpoint: PageCheckpoint {
        var checkpoint = PageCheckpoint()
        for (name, key) in keys {
            checkpoint.shown[name] = key.list
            checkpoint.level[name] = key.list
        }
        checkpoint.answers = answers
        checkpoint.waiting = requests.map { "\($0.key)@\($0.cursor.map(String.init) ?? "first")" }
        return checkpoint
    }

    mutating func apply(_ step: PageStep) {
        server.apply(step)
        switch step {
        case .loadNextPage(let name): loadPage(name, before: false)
        case .loadPreviousPage(let name): loadPage(name, before: true)
        case .refresh(let name):
            callerCount += 1
            answers[callerCount] = []
            beginFetch(name, for: .refresh(callerCount), joining: false)
        case .answer(let index) where index < requests.count:
            let request = requests.remove(at: index)
            received(.success(server.page(of: request.key, at: request.cursor)), for: request)
        case .fail(let index) where index < requests.count:
            received(.failure(TestError.model), for: requests.remove(at: index))
        case .liveInsert(let name, let index, let number): change(name, .liveInsert(index: index, number))
        case .liveInsertWhile(let name, let index, let number, let during):
            // What happens during the change comes after it in the store's order.
            change(name, .liveInsert(index: index, number))
            apply(during)
        case .cancel(let caller): cancel(caller)
        case .remove(let name): forget(name)
        case .clear: for name in keys.keys { forget(name) }
        default: break
        }
    }

    // MARK: Loading the next page, or the previous one

    private mutating func loadPage(_ name: String, before: Bool) {
        callerCount += 1
        answers[callerCount] = []
        if keys[name]!.loadCallers[before] != nil { return keys[name]!.loadCallers[before]!.append(callerCount) }
        keys[name]!.loadCallers[before] = [callerCount]
        guard let list = keys[name]!.list else { return beginFetch(name, for: .load(before: before), joining: true) }
        guard let cursor = before ? list.first?.previous : list.last?.next else {
            return endLoad(name, before: before, with: .list(list, withError: false))
        }
        let purpose: Purpose = before ? .prepend(before: list.first) : .append(after: list.last)
        requests.append(Request(key: name, cursor: cursor, purpose: purpose))
    }

    private mutating func endLoad(_ name: String, before: Bool, with answer: PageAnswer) {
        for caller in keys[name]!.loadCallers[before] ?? [] { answers[caller]!.append(answer) }
        keys[name]!.loadCallers[before] = nil
    }

    private mutating func received(_ result: Result<ModelPage, TestError>, for request: Request) {
        switch (request.purpose, result) {
        case (.append(let last), .success(let page)):
            change(request.key, .append(page, after: last))
            endLoad(request.key, before: false, with: .list(keys[request.key]!.list, withError: false))
        case (.prepend(let first), .success(let page)):
            change(request.key, .prepend(page, before: first))
            endLoad(request.key, before: true, with: .list(keys[request.key]!.list, withError: false))
        case (.append, .failure):
            endLoad(request.key, before: false, with: .failed)
        case (.prepend, .failure):
            endLoad(request.key, before: true, with: .failed)
        case (.walk(let id), _):
            guard let index = keys[request.key]!.fetches.firstIndex(where: { $0.id == id }) else { return }
            walk(request.key, fetch: index, received: result)
        }
    }

    /// A caller's cancel drops its interest alone; the last caller of a load or a fetch to leave cancels it (and the
    /// request it waits for). A caller answered already changes nothing.
    private mutating func cancel(_ caller: Int) {
        guard answers[caller]?.isEmpty == true else { return }
        for name in keys.keys.sorted() {
            for before in [false, true] {
                guard let callers = keys[name]!.loadCallers[before], callers.contains(caller) else { continue }
                keys[name]!.loadCallers[before]!.removeAll { $0 == caller }
                guard keys[name]!.loadCallers[before]!.isEmpty else { return }
                keys[name]!.loadCallers[before] = nil
                // The page it waits for, or else the store's read of the first page.
                guard let request = requests.firstIndex(where: { $0.key == name && $0.adds(before: before) }) else {
                    return leave(name, .load(before: before))
                }
                requests.remove(at: request)
                return
            }
            if keys[name]!.fetches.contains(where: { $0.callers.contains(.refresh(caller)) }) {
                return leave(name, .refresh(caller))
            }
        }
    }

    /// `caller` leaves the fetch it waits for; the fetch is cancelled when no caller is left.
    private mutating func leave(_ name: String, _ caller: Caller) {
        guard let index = keys[name]!.fetches.firstIndex(where: { $0.callers.contains(caller) }) else { return }
        keys[name]!.fetches[index].callers.removeAll { $0 == caller }
        guard keys[name]!.fetches[index].callers.isEmpty else { return }
        let fetch = keys[name]!.fetches.remove(at: index)
        requests.removeAll { $0.purpose == .walk(fetch: fetch.id) }
        if keys[name]!.fetches.isEmpty { keys[name]!.log = [] }
    }

    // MARK: Changes

    private mutating func change(_ name: String, _ change: Change) {
        keys[name]!.logSequence += 1
        keys[name]!.log.append(Logged(sequence: keys[name]!.logSequence, change: change))
        keys[name]!.list = applied(change, to: keys[name]!.list)
    }

    private func applied(_ change: Change, to list: [ModelPage]?) -> [ModelPage]? {
        guard var list else { return nil }
        switch change {
        case .append(let page, let last):
            // A list whose last page changed under the request does not get it.
            guard list.last == last else { return list }
            var page = page
            // A next cursor loaded already ends the list.
            if let next = page.next, next == page.cursor || list.contains(where: { $0.cursor == next }) {
                page = ModelPage(cursor: page.cursor, items: page.items, next: nil, previous: page.previous)
            }
            list.append(page)
            if let maxPages, list.count > max(1, maxPages) { list.removeFirst(list.count - max(1, maxPages)) }
        case .prepend(var page, let first):
            guard list.first == first else { return list }
            // A previous cursor loaded already ends the list upward.
            if let previous = page.previous, previous == page.cursor || list.contains(where: { $0.cursor == previous })
            {
                page.previous = nil
            }
            page.isPrevious = true
            list.insert(page, at: 0)
            if let maxPages, list.count > max(1, maxPages) { list.removeLast(list.count - max(1, maxPages)) }
        case .liveInsert(let index, let number):
            var start = 0
            for page in list.indices {
                if index < start + list[page].items.count || page == list.count - 1 {
                    list[page].items = Array(Set(list[page].items + [number])).sorted()
                    break
                }
                start += list[page].items.count
            }
        }
        return list
    }

    /// A removal or a clear of the key: fetches in flight confirm nothing.
    private mutating func forget(_ name: String) {
        keys[name]!.generation += 1
        keys[name]!.list = nil
    }

    // MARK: The store's fetch: a refresh walk

    private mutating func beginFetch(_ name: String, for caller: Caller, joining: Bool) {
        let key = keys[name]!
        if joining, let last = key.fetches.indices.last, key.fetches[last].generation == key.generation {
            return keys[name]!.fetches[last].callers.append(caller)
        }
        fetchCount += 1
        let logStart = min(
            key.fetches.filter { $0.generation == key.generation }.map(\.logStart).min() ?? .max, key.logSequence)
        let old = key.list ?? []
        keys[name]!.fetches.append(
            Fetch(id: fetchCount, generation: key.generation, logStart: logStart, old: old, callers: [caller]))
        requests.append(Request(key: name, cursor: old.first?.cursor, purpose: .walk(fetch: fetchCount)))
    }

    private mutating func walk(_ name: String, fetch index: Int, received result: Result<ModelPage, TestError>) {
        guard case .success(var page) = result else { return endFetch(name, fetch: index, with: nil) }
        let fetch = keys[name]!.fetches[index]
        let position = fetch.fresh.count
        // A list that grew upward is walked by next cursors: its pages are compared by the page alone.
        let grewUpward = fetch.old.first?.isPrevious == true
        if position < fetch.old.count, fetch.old[position].isSame(as: page, byCursor: !grewUpward) {
            return endFetch(name, fetch: index, with: fetch.fresh + fetch.old[position...])
        }
        page.isPrevious = position == 0 && grewUpward  // the first page keeps how it was loaded
        keys[name]!.fetches[index].fresh.append(page)
        guard let next = page.next, position + 1 < fetch.old.count else {
            return endFetch(name, fetch: index, with: keys[name]!.fetches[index].fresh)
        }
        requests.append(Request(key: name, cursor: next, purpose: .walk(fetch: fetch.id)))
    }

    /// The fetch at `index` ends with `list`, or fails (`nil`).
    private mutating func endFetch(_ name: String, fetch index: Int, with list: [ModelPage]?) {
        let fetch = keys[name]!.fetches.remove(at: index)
        let key = keys[name]!
        let confirms = list != nil && fetch.generation == key.generation && fetch.id > key.lastConfirmedFetch
        if confirms, let list {
            keys[name]!.lastConfirmedFetch = fetch.id
            let changes = key.log.filter { $0.sequence > fetch.logStart }.map(\.change)
            keys[name]!.list = changes.reduce(list) { applied($1, to: $0) }
        }
        let shown = keys[name]!.list
        for caller in fetch.callers {
            switch caller {
            case .refresh(let id):
                // A refresh overtaken by a removal or a clear fails; one overtaken by a later fetch shows its list.
                let overtaken = list == nil || fetch.generation != key.generation
                answers[id]!.append(overtaken ? .failed : .list(shown, withError: false))
            case .load(let before):
                // The store's read: on a failure, what the key shows with the error, or the failure.
                let answer: PageAnswer =
                    list != nil
                    ? .list(shown, withError: false)
                    : shown == nil ? .failed : .list(shown, withError: true)
                endLoad(name, before: before, with: answer)
            }
        }
        if keys[name]!.fetches.isEmpty { keys[name]!.log = [] }
    }
}
