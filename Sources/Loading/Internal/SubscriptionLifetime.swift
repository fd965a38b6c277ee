import CLoadingAtomics

/// The lifetime of one subscription (or of one part of it): active until it is ended, by a cancel or after a
/// terminal event, at which point the clean-up actions registered on it run, once. A value with reference
/// semantics: copies share one lifetime.
///
/// Synchronous operators share their subscriber's lifetime; operators that end their upstream on their own terms
/// (catch, retry, merge, flatMap, receive(on:), debounce) give the upstream a child lifetime, which ends with its
/// parent or on its own.
///
/// Every event checks ``isActive``, so it is read without the lock: the flag is a word written with an atomic
/// release store (under the lock, when the lifetime ends) and read with an atomic acquire load. The flag, the rest
/// of the state and the mutex share one allocation (a `ManagedBuffer`). Like ``Locked``, it is `@unchecked Sendable`
/// because its mutable state is only reached under its own mutex, and the flag only atomically.
@usableFromInline
struct SubscriptionLifetime: @unchecked Sendable {
    @usableFromInline
    struct Header {
        /// 1 while active, 0 once ended; atomic.
        @usableFromInline var activeFlag: Int = 1
        @usableFromInline var nextKey = 0
        /// The first action, kept apart so that the common lifetime (one clean-up) allocates no array.
        @usableFromInline var firstAction: (key: Int, action: @Sendable () -> Void)?
        @usableFromInline var actions: [(key: Int, action: @Sendable () -> Void)] = []
        /// For a child: the parent and the key of the action that ends this child, removed when this ends first.
        @usableFromInline var parent: (storage: Storage, key: Int)?

        @inlinable
        init() {}
    }

    @usableFromInline
    final class Storage: ManagedBuffer<Header, PlatformLock> {
        deinit {
            withUnsafeMutablePointerToElements { $0.destroyLock() }
        }
    }

    @usableFromInline
    let storage: Storage

    /// Creates an active lifetime.
    @inlinable
    init() {
        let buffer = Storage.create(minimumCapacity: 1) { _ in Header() }
        buffer.withUnsafeMutablePointerToElements { $0.initializeLock() }
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    @inlinable
    init(storage: Storage) {
        self.storage = storage
    }

    /// Runs `body` on the header with the mutex held.
    @inlinable
    func withLock<R>(_ body: (UnsafeMutablePointer<Header>) -> R) -> R {
        storage.withUnsafeMutablePointers { header, lock in
            lock.withLockHeld { body(header) }
        }
    }

    @inlinable
    static func flag(of header: UnsafeMutablePointer<Header>) -> UnsafeMutablePointer<Int> {
        (UnsafeMutableRawPointer(header) + MemoryLayout<Header>.offset(of: \Header.activeFlag)!)
            .assumingMemoryBound(to: Int.self)
    }

    /// Whether the lifetime has not ended yet (lock-free).
    @inlinable
    var isActive: Bool {
        storage.withUnsafeMutablePointerToHeader { header in
            loading_atomic_load_acquire(Self.flag(of: header)) != 0
        }
    }

    /// Runs `action` when the lifetime ends, or at once if it has. Returns a key to remove it with.
    @discardableResult
    @inlinable
    func onEnd(_ action: @escaping @Sendable () -> Void) -> Int? {
        let key = withLock { header -> Int? in
            guard loading_atomic_load_acquire(Self.flag(of: header)) != 0 else { return nil }
            header.pointee.nextKey += 1
            if header.pointee.firstAction == nil {
                header.pointee.firstAction = (header.pointee.nextKey, action)
            } else {
                header.pointee.actions.append((header.pointee.nextKey, action))
            }
            return header.pointee.nextKey
        }
        if key == nil { action() }
        return key
    }

    /// Forgets the action registered under `key`.
    @inlinable
    func removeAction(_ key: Int) {
        withLock { header in
            if header.pointee.firstAction?.key == key {
                header.pointee.firstAction = nil
            } else if let index = header.pointee.actions.firstIndex(where: { $0.key == key }) {
                header.pointee.actions.remove(at: index)
            }
        }
    }

    /// Ends the lifetime and runs its actions. Returns `false` if it had already ended.
    @discardableResult
    @inlinable
    func end() -> Bool {
        let taken = withLock {
            header -> ((@Sendable () -> Void)?, [(key: Int, action: @Sendable () -> Void)], (storage: Storage, key: Int)?)? in
            guard loading_atomic_load_acquire(Self.flag(of: header)) != 0 else { return nil }
            loading_atomic_store_release(Self.flag(of: header), 0)
            defer {
                header.pointee.firstAction = nil
                header.pointee.actions = []
                header.pointee.parent = nil
            }
            return (header.pointee.firstAction?.action, header.pointee.actions, header.pointee.parent)
        }
        guard let (first, actions, parent) = taken else { return false }
        if let parent { SubscriptionLifetime(storage: parent.storage).removeAction(parent.key) }
        first?()
        for entry in actions { entry.action() }
        return true
    }

    /// A lifetime that ends when this one does, or earlier on its own; once ended, it no longer burdens this one.
    ///
    /// Parent and child refer to each other until either ends: ending clears a lifetime's actions and its parent
    /// link, which breaks the cycle whichever ends first.
    @inlinable
    func makeChild() -> SubscriptionLifetime {
        let child = SubscriptionLifetime()
        if let key = onEnd({ child.end() }) {
            let parentStorage = storage
            child.withLock { header in header.pointee.parent = (parentStorage, key) }
        }
        return child
    }
}
