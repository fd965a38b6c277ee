#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The store changes whose closures the calling thread runs now, innermost last: a read of one of their keys made from
/// inside those closures must not wait for them. One list per thread, made the first time the thread runs a change and
/// reused after (a change run costs no allocation); only its thread touches it. A change's closures are synchronous,
/// so what they call runs on that thread.
final class ChangesRunningHere {
    private var running: [StoreEngine.RunningChange] = []

    private init() {}

    /// The calling thread's list.
    static var current: ChangesRunningHere {
        if let stored = pthread_getspecific(threadSlot) {
            return Unmanaged<ChangesRunningHere>.fromOpaque(stored).takeUnretainedValue()
        }
        let made = ChangesRunningHere()
        // Released by the slot's destructor when the thread ends.
        pthread_setspecific(threadSlot, Unmanaged.passRetained(made).toOpaque())
        return made
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
}

/// The thread-specific slot of each thread's ``ChangesRunningHere``.
private let threadSlot: pthread_key_t = {
    var slot = pthread_key_t()
    let created = pthread_key_create(&slot) { stored in
        // Optional on some platforms, not on others.
        let stored: UnsafeMutableRawPointer? = stored
        guard let stored else { return }
        Unmanaged<ChangesRunningHere>.fromOpaque(stored).release()
    }
    precondition(created == 0, "A thread-specific slot could not be made (error \(created))")
    return slot
}()
