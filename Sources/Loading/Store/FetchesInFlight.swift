extension StoreMachine {
    /// A key's fetches in flight, oldest first, and the newest fetch whose value was confirmed: last asked wins, so a
    /// fetch's value is confirmed only if no fetch started after it was confirmed first. A fetch from before a
    /// removal or a clear (another generation) stays until it ends, but brings nothing a caller may see.
    struct FetchesInFlight: Sendable {
        private var fetches: [Fetch] = []
        /// The id of the newest fetch whose value was confirmed.
        private var lastConfirmed = 0

        /// Whether no fetch is in flight.
        var isEmpty: Bool { fetches.isEmpty }

        /// Whether a fetch in flight is not abandoned (left by every caller before its token came).
        var hasCallers: Bool { fetches.contains { !$0.isAbandoned } }

        /// The fetches in flight that are not abandoned, oldest first; read in place, not copied.
        var withCallers: LazyFilterSequence<[Fetch]> { fetches.lazy.filter { !$0.isAbandoned } }

        /// Whether a fetch of `generation` is in flight: the key is loading.
        func isLoading(generation: Int) -> Bool {
            fetches.contains { $0.generation == generation }
        }

        /// Whether fetch `id` is in flight.
        func contains(_ id: Int) -> Bool {
            fetches.contains { $0.id == id }
        }

        /// Fetch `id`, while it is in flight.
        func fetch(_ id: Int) -> Fetch? {
            fetches.first { $0.id == id }
        }

        /// Where the oldest fetch in flight starts counting the changes it applies again (of `generation` only,
        /// when given); `nil` when none is in flight.
        func oldestLogStart(generation: Int? = nil) -> Int? {
            fetches.lazy.filter { generation == nil || $0.generation == generation }.map { $0.logStart }.min()
        }

        /// Adds `caller` to the newest fetch in flight when it is of `generation` and still has callers; returns its
        /// id, or `nil` when there is none to join.
        mutating func join(_ caller: FetchCaller, generation: Int) -> Int? {
            guard let index = fetches.indices.last, !fetches[index].isAbandoned,
                fetches[index].generation == generation
            else { return nil }
            fetches[index].callers.append(caller, id: caller.id)
            return fetches[index].id
        }

        /// A fetch begins, newest of all (made here, in place: a fetch is copied through its value witnesses).
        mutating func begin(id: Int, generation: Int, logStart: Int, sentMark: Int, caller: FetchCaller) {
            fetches.append(
                Fetch(
                    id: id, generation: generation, logStart: logStart, sentMark: sentMark,
                    callers: OrderedQueue(caller, id: caller.id)))
        }

        /// Adds `caller` to fetch `id`; `false` when it is not in flight.
        mutating func add(_ caller: FetchCaller, to id: Int) -> Bool {
            update(id) { $0.callers.append(caller, id: caller.id) } != nil
        }

        /// Keeps the token of fetch `id`'s upstream load. Returns `true` when every caller left the fetch before:
        /// it ends now, and the token is the caller's to cancel.
        mutating func keepToken(_ token: any CancellationToken, of id: Int) -> Bool {
            let abandoned = update(id) { fetch in
                if !fetch.isAbandoned { fetch.token = token }
                return fetch.isAbandoned
            }
            guard abandoned == true else { return false }
            _ = end(id)
            return true
        }

        /// Drops `caller` of fetch `id`; `nil` when it is not one. When it was the last, a fetch whose token was
        /// kept ends (`ended`: the caller cancels its token); one whose token is not kept yet is abandoned (the token
        /// is cancelled when it is kept).
        mutating func leave(_ caller: Int, of id: Int) -> (left: FetchCaller, ended: Fetch?)? {
            let left = update(id) { fetch -> (FetchCaller, hasToken: Bool)? in
                guard let left = fetch.callers.remove(id: caller) else { return nil }
                guard fetch.callers.isEmpty else { return (left, false) }
                if fetch.token == nil { fetch.isAbandoned = true }
                return (left, fetch.token != nil)
            }
            guard let (caller, hasToken) = left ?? nil else { return nil }
            return (caller, hasToken ? end(id) : nil)
        }

        /// Fetch `id` sends its request at `mark`, in the store's order.
        mutating func send(_ id: Int, at mark: Int) {
            _ = update(id) { $0.sentMark = mark }
        }

        /// Fetch `id` waits for the network before it sends its request: it counts as not sent. Returns when it had
        /// counted as sent, while it has callers.
        mutating func wait(_ id: Int) -> Int? {
            update(id) { fetch in
                defer { fetch.sentMark = nil }
                return fetch.isAbandoned ? nil : fetch.sentMark
            } ?? nil
        }

        /// Fetch `id` was answered by level `level`, which another process saved the value to at `savedAt`.
        mutating func noteLevelAnswer(of id: Int, level: Int, savedAt: Double) {
            _ = update(id) { $0.levelAnswer = (level, savedAt) }
        }

        /// Fetch `id` ends; `nil` when it was not in flight. The list keeps its storage: the machine takes it back
        /// (``giveStorage(to:)``).
        mutating func end(_ id: Int) -> Fetch? {
            guard let index = fetches.firstIndex(where: { $0.id == id }) else { return nil }
            return fetches.remove(at: index)
        }

        /// Takes `spare`'s storage when the list has none, before a fetch begins: the storage another key's
        /// fetches left (see ``giveStorage(to:)``), so that the next key to fetch makes none.
        mutating func takeStorage(from spare: inout [Fetch]) {
            if fetches.capacity == 0 { swap(&fetches, &spare) }
        }

        /// Lets go of the list's storage once no fetch is in flight: a key holds no room for fetches between them.
        /// It goes to `spare` when that has none (``takeStorage(from:)``).
        mutating func giveStorage(to spare: inout [Fetch]) {
            guard fetches.isEmpty, fetches.capacity > 0 else { return }
            if spare.capacity == 0 { swap(&fetches, &spare) } else { fetches = [] }
        }

        /// Whether the value fetch `id` (ended) brought is confirmed: not when a fetch started after it was confirmed
        /// first. Notes it as the newest confirmed.
        mutating func confirm(_ id: Int) -> Bool {
            guard id > lastConfirmed else { return false }
            lastConfirmed = id
            return true
        }

        private mutating func update<Result>(_ id: Int, _ change: (inout Fetch) -> Result) -> Result? {
            guard let index = fetches.firstIndex(where: { $0.id == id }) else { return nil }
            return change(&fetches[index])
        }
    }

    /// A fetch in flight and the callers waiting for it; only ``FetchesInFlight`` changes it.
    struct Fetch: Sendable {
        init(id: Int, generation: Int, logStart: Int, sentMark: Int, callers: OrderedQueue<FetchCaller>) {
            self.id = id
            self.generation = generation
            self.logStart = logStart
            self.callers = callers
            self.sentMark = sentMark
        }

        let id: Int
        let generation: Int
        /// Logged changes with a greater sequence number were made after the fetch started.
        let logStart: Int
        /// In the order they joined (their ids grow in that order).
        fileprivate(set) var callers: OrderedQueue<FetchCaller>
        fileprivate(set) var token: (any CancellationToken)?
        /// Every caller left before the token was kept: the token is cancelled when it is.
        fileprivate(set) var isAbandoned = false
        /// When its request went out, in the store's order: just after its caller was asked, or later for a fetch that
        /// waited for the network (`nil` while it waits). What it brings is fresh against the invalidations made
        /// before.
        fileprivate(set) var sentMark: Int?
        /// The level another process saved the answer to, and when (seconds since the reference date), when the
        /// answer came from there (see ``StoreMachine/fetchAnsweredByLevel(_:of:level:savedAt:)``).
        fileprivate(set) var levelAnswer: (level: Int, savedAt: Double)?

        /// Whether `change` was made while this fetch was in flight, in its generation: what the fetch brings gets it
        /// applied again.
        func appliesAgain(_ change: LoggedChange) -> Bool {
            change.sequence > logStart && change.generation == generation
        }
    }
}
