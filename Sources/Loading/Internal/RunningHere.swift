#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the calling thread runs now of the stores' work, innermost last: the changes whose closures it runs (a read
/// of one of their keys made from inside those closures must not wait for them), and the upstream loads it is
/// starting (a load that answers before its start returns has ended: its token needs no keeping). One per thread,
/// made the first time the thread runs a change or starts a load and reused after (neither costs an allocation then);
/// only its thread touches it. A change's closures are synchronous, so what they call runs on that thread; a load's
/// answer given before its start returns is given on that thread too.
final class RunningHere {
    private var running: [StoreEngine.RunningChange] = []
    /// The upstream loads being started here: their store, their fetch, and whether the fetch ended meanwhile.
    private var starting: [(store: ObjectIdentifier, fetch: Int, ended: Bool)] = []

    private init() {}

    /// The calling thread's list.
    static var current: RunningHere {
        if let made { return made }
        let made = RunningHere()
        // Released by the slot's destructor when the thread ends.
        pthread_setspecific(threadSlot, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    /// The calling thread's list, when it has made one: nothing runs here otherwise.
    static var made: RunningHere? {
        pthread_getspecific(threadSlot).map { Unmanaged<RunningHere>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with `change` counted as running on this thread.
    func run<Result>(_ change: StoreEngine.RunningChange, _ body: () -> Result) -> Result {
        running.append(change)
        defer { running.removeLast() }
        return body()
    }

    /// Whether a running change satisfies `matches`.
    func contains(where matches: (StoreEngine.RunningChange) -> Bool) -> Bool {
        running.contains(where: matches)
    }

    /// Runs `body`, which starts the upstream load of fetch `id` of `store`; returns its result, and whether the
    /// fetch ended before it returned (``fetchEnded(_:of:)``).
    func start<Result>(fetch id: Int, of store: AnyObject, _ body: () -> Result) -> (Result, ended: Bool) {
        starting.append((ObjectIdentifier(store), id, false))
        let result = body()
        return (result, starting.removeLast().ended)
    }

    /// Fetch `id` of `store` ended, its answer taken by the store: when its load is being started here, the start
    /// is told.
    func fetchEnded(_ id: Int, of store: AnyObject) {
        Self.mark(&starting, ended: id, of: ObjectIdentifier(store))  // one access to the list, not two
    }

    private static func mark(
        _ starting: inout [(store: ObjectIdentifier, fetch: Int, ended: Bool)], ended id: Int,
        of store: ObjectIdentifier
    ) {
        guard let index = starting.lastIndex(where: { $0.store == store && $0.fetch == id }) else { return }
        starting[index].ended = true
    }
}

/// The thread-specific slot of each thread's ``RunningHere``.
private let threadSlot: pthread_key_t = {
    var slot = pthread_key_t()
    let created = pthread_key_create(&slot) { stored in
        // Optional on some platforms, not on others.
        let stored: UnsafeMutableRawPointer? = stored
        guard let stored else { return }
        Unmanaged<RunningHere>.fromOpaque(stored).release()
    }
    precondition(created == 0, "A thread-specific slot could not be made (error \(created))")
    return slot
}()
