/// Runs steps one after another in constant stack depth: a step asked for while another runs (an attempt that failed
/// synchronously and is retried at once) is handed to the running loop instead of nesting inside it, so a million
/// synchronous retries use the stack of one.
///
/// Only one step may wait at a time: its users (the retries) never have two attempts in flight.
final class Trampoline: Sendable {
    private struct State: Sendable {
        var isRunning = false
        var next: (@Sendable () -> Void)?
    }

    private let state = Locked(State())

    init() {}

    /// Runs `step` now, or after the step that is running returns.
    func run(_ step: @escaping @Sendable () -> Void) {
        let runsNow = state.withLock { state -> Bool in
            guard !state.isRunning else {
                state.next = step
                return false
            }
            state.isRunning = true
            return true
        }
        guard runsNow else { return }
        var current = step
        while true {
            current()
            let next = state.withLock { state -> (@Sendable () -> Void)? in
                let next = exchange(&state.next, with: nil)
                if next == nil { state.isRunning = false }
                return next
            }
            guard let next else { return }
            current = next
        }
    }
}
