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
/// release store (under the lock, when the lifetime ends) and read with an atomic acquire load, and it lives apart
/// from the Swift-accessed state so that the two never overlap. The flag, the rest of the state and the mutex share
/// one allocation (a `ManagedBuffer`). Like ``Locked``, it is `@unchecked Sendable`
/// because its mutable state is only reached under its own mutex, and the flag only atomically.
@usableFromInline
struct SubscriptionLifetime: @unchecked Sendable {
    private struct Header {
        var nextKey = 0
        /// The first action, kept apart so that the common lifetime (one clean-up) allocates no array.
        var firstAction: (key: Int, action: @Sendable () -> Void)?
        var actions: [(key: Int, action: @Sendable () -> Void)] = []
        /// For a child: the parent and the key of the action that ends this child, removed when this ends first.
        var parent: (storage: Storage, key: Int)?
    }

    /// The header holds what the lock protects. The element words hold, apart from it so that no Swift access
    /// to the header ever touches them: word 0, the active flag (1 while active, 0 once ended; only ever accessed
    /// atomically), then the mutex.
    private final class Storage: ManagedBuffer<Header, Int> {
        static let lockWords = (MemoryLayout<PlatformLock>.size + MemoryLayout<Int>.size - 1) / MemoryLayout<Int>.size

        deinit {
            withUnsafeMutablePointerToElements { Storage.lock(in: $0).destroyLock() }
        }

        static func lock(in words: UnsafeMutablePointer<Int>) -> UnsafeMutablePointer<PlatformLock> {
            UnsafeMutableRawPointer(words + 1).assumingMemoryBound(to: PlatformLock.self)
        }
    }

    private let storage: Storage

    /// Creates an active lifetime.
    @usableFromInline
    init() {
        let buffer = Storage.create(minimumCapacity: 1 + Storage.lockWords) { _ in Header() }
        buffer.withUnsafeMutablePointerToElements { words in
            words.initialize(to: 1)
            UnsafeMutableRawPointer(words + 1).bindMemory(to: PlatformLock.self, capacity: 1).initializeLock()
        }
        storage = buffer as! Storage  // `create` makes an instance of the class it is called on
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    /// Runs `body` on the header and the flag with the mutex held.
    private func withLock<R>(_ body: (UnsafeMutablePointer<Header>, UnsafeMutablePointer<Int>) -> R) -> R {
        storage.withUnsafeMutablePointers { header, words in
            Storage.lock(in: words).withLockHeld { body(header, words) }
        }
    }

    /// Whether the lifetime has not ended yet (lock-free).
    @usableFromInline
    var isActive: Bool {
        storage.withUnsafeMutablePointerToElements { flag in
            loading_atomic_load_acquire(flag) != 0
        }
    }

    /// Runs `action` when the lifetime ends, or at once if it has. Returns a key to remove it with.
    @discardableResult
    @usableFromInline
    func onEnd(_ action: @escaping @Sendable () -> Void) -> Int? {
        let key = withLock { header, flag -> Int? in
            guard loading_atomic_load_acquire(flag) != 0 else { return nil }
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
    func removeAction(_ key: Int) {
        let removed = withLock { header, _ -> (@Sendable () -> Void)? in
            if header.pointee.firstAction?.key == key {
                defer { header.pointee.firstAction = nil }
                return header.pointee.firstAction?.action
            } else if let index = header.pointee.actions.firstIndex(where: { $0.key == key }) {
                return header.pointee.actions.remove(at: index).action
            }
            return nil
        }
        withExtendedLifetime(removed) {}  // released after unlocking
    }

    /// Ends the lifetime and runs its actions. Returns `false` if it had already ended.
    @discardableResult
    @usableFromInline
    func end() -> Bool {
        let taken = withLock {
            header, flag -> (
                (@Sendable () -> Void)?, [(key: Int, action: @Sendable () -> Void)], (storage: Storage, key: Int)?
            )? in
            guard loading_atomic_load_acquire(flag) != 0 else { return nil }
            loading_atomic_store_release(flag, 0)
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
    @usableFromInline
    func makeChild() -> SubscriptionLifetime {
        let child = SubscriptionLifetime()
        if let key = onEnd({ child.end() }) {
            let parentStorage = storage
            child.withLock { header, _ in header.pointee.parent = (parentStorage, key) }
        }
        return child
    }
}
