/// A value that is only ever read or written while a mutex is held.
///
/// One of the two lock boxes in `Loading` marked `@unchecked Sendable` (the other is ``SubscriptionLifetime``, a lock
/// box with a lock-free flag; FriendsDomain adds `QueueConfined`). It is safe because `state` is reachable only
/// through ``withLock(_:)``, which holds the platform mutex (os_unfair_lock on Apple platforms, pthread_mutex
/// elsewhere) for the whole access, and the stored state must itself be `Sendable`. The state and the mutex live in
/// one allocation (a `ManagedBuffer`), so a box costs one allocation.
///
/// Its methods are `@inlinable` so that client modules specialize them: unspecialized, every lock would look up
/// generic metadata at run time (measured in Benchmarks, scenario 2).
///
/// Rule for callers: never call out (closures, subscribers, continuations) inside `withLock`; decide under the lock,
/// return what to do, and do it after.
@usableFromInline
package struct Locked<State: Sendable>: @unchecked Sendable {
    @usableFromInline
    final class Storage: ManagedBuffer<State, PlatformLock> {
        deinit {
            withUnsafeMutablePointerToElements { $0.destroyLock() }
        }
    }

    @usableFromInline
    let storage: Storage

    @inlinable
    package init(_ initial: State) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in initial }
        buffer.withUnsafeMutablePointerToElements { $0.initializeLock() }
        // `create` returns the dynamic subclass type; the cast cannot fail.
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    package func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointers { state, lock in
            try lock.withLockHeld { try body(&state.pointee) }
        }
    }
}
