import Dispatch

/// A value that lives on one serial dispatch queue: it may only be touched from code running on that queue, which
/// every access checks (`dispatchPrecondition`), so it never needs a lock.
///
/// `@unchecked Sendable` is safe here because the value is never reached except through ``withValue(_:)``, which
/// traps when called off the queue, and a serial queue runs one block at a time. This is how the SQLite store keeps
/// its one connection, which is not thread-safe, on one queue.
final class QueueConfined<Value>: @unchecked Sendable {
    let queue: DispatchQueue
    private var value: Value

    init(_ value: Value, queue: DispatchQueue) {
        self.value = value
        self.queue = queue
    }

    /// Runs `body` with the value; must be called on `queue`.
    func withValue<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        dispatchPrecondition(condition: .onQueue(queue))
        return try body(&value)
    }
}
