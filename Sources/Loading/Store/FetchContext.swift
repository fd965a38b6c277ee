#if canImport(Dispatch)
    import Dispatch
#endif

/// Where a ``Store``'s fetches start: in the task of the caller that started each one (by default), outside any
/// caller's task, or in a context the app gives.
///
/// A fetch is shared: the callers that ask for a key while it runs join it. By default it starts on the thread of
/// the caller that started it, in that caller's task, so the upstream load sees that caller's task-local values (a
/// request id, a trace): for every caller that joins it too, and after that caller is cancelled, as the fetch goes on
/// while others wait for it. When that is not what a fetch should carry, give the store another context:
///
/// ```swift
/// let store = Store(
///     levels: [.cache(MemoryCache(), name: "memory")],
///     fetch: LoaderFamily { (id: String) in api.quote(id) },
///     fetchContext: .custom { start in
///         RequestContext.$id.withValue("fetch") { start() }   // a context of the fetch's own
///     })
/// ```
public struct FetchContext: Sendable {
    /// Starts an upstream load in the context, or `nil` to start it where it was asked.
    let run: (@Sendable (_ start: @escaping @Sendable () -> Void) -> Void)?

    /// Each fetch starts on the thread of the caller that started it, in its task, with its task-local values.
    public static var caller: FetchContext {
        FetchContext(run: nil)
    }

    /// Each fetch starts on a global queue, outside any caller's task: it carries no caller's task-local values.
    public static var detached: FetchContext {
        FetchContext { start in DispatchQueue.global().async(execute: start) }
    }

    /// Each fetch starts inside `context`, which is given the start of the upstream load and calls it once, now or
    /// later, where and with what it chooses (task-local values of the fetch's own, a span, a queue).
    public static func custom(
        _ context: @escaping @Sendable (_ start: @escaping @Sendable () -> Void) -> Void
    ) -> FetchContext {
        FetchContext(run: context)
    }
}
