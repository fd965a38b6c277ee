/// A value that is only ever read or written while a mutex is held: the lock box behind every piece of shared state in
/// `Loading`, public so that the loaders, caches and test doubles you write can keep state `Sendable` on every
/// platform the package supports (`Synchronization.Mutex` needs macOS 15 / iOS 18).
///
/// ```swift
/// let hits = Locked(0)
/// hits.withLock { $0 += 1 }
/// ```
/// **Never run other code under the lock**, and that includes releasing it: a closure, a subscriber or a value
/// dropped inside `withLock` runs its captures' deinitializers there, and one that calls back into the same box
/// deadlocks. Decide under the lock, return what must be called or released, and call or release it after:
/// ```swift
/// let handlers = Locked<[@Sendable () -> Void]>([])
/// let taken = handlers.withLock { handlers in
///     defer { handlers = [] }
///     return handlers
/// }
/// for handler in taken { handler() }  // called, then released, after unlocking
/// ```
///
/// It is `@unchecked Sendable` because `state` is reachable only through ``withLock(_:)``, which holds the platform
/// mutex (os_unfair_lock on Apple platforms, pthread_mutex elsewhere) for the whole access, and the state must itself
/// be `Sendable`. The state and the mutex share one allocation (a `ManagedBuffer`); copies share the state. Its
/// methods are `@inlinable` so that client modules specialize them: unspecialized, every lock would look up generic
/// metadata at run time.
public struct Locked<State: Sendable>: @unchecked Sendable {
    @usableFromInline
    final class Storage: ManagedBuffer<State, PlatformLock> {
        deinit {
            withUnsafeMutablePointerToElements { $0.destroyLock() }
        }
    }

    @usableFromInline
    let storage: Storage

    /// Creates a box holding `initial`.
    @inlinable
    public init(_ initial: State) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in initial }
        buffer.withUnsafeMutablePointerToElements { $0.initializeLock() }
        storage = buffer as! Storage  // `create` makes an instance of the class it is called on
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    public func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointers { state, lock in
            try lock.withLockHeld { try body(&state.pointee) }
        }
    }
}
