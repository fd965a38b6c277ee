#if canImport(os)
    import os
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Bionic)
    import Bionic
#endif

#if canImport(os)
    @usableFromInline typealias PlatformLock = os_unfair_lock_s
#else
    @usableFromInline typealias PlatformLock = pthread_mutex_t
#endif

extension UnsafeMutablePointer where Pointee == PlatformLock {
    /// Initializes the platform mutex at this address (inside a `ManagedBuffer`, whose address is stable).
    @inlinable
    func initializeLock() {
        #if canImport(os)
            initialize(to: os_unfair_lock_s())
        #else
            initialize(to: pthread_mutex_t())
            pthread_mutex_init(self, nil)
        #endif
    }

    /// Destroys the mutex; the buffer's deinit calls it.
    func destroyLock() {
        #if !canImport(os)
            pthread_mutex_destroy(self)
        #endif
        deinitialize(count: 1)
    }

    /// Runs `body` with the mutex held.
    @inlinable
    func withLockHeld<R>(_ body: () throws -> R) rethrows -> R {
        #if canImport(os)
            os_unfair_lock_lock(self)
            defer { os_unfair_lock_unlock(self) }
        #else
            pthread_mutex_lock(self)
            defer { pthread_mutex_unlock(self) }
        #endif
        return try body()
    }
}
