/// Tells when the app comes to the foreground: what the foreground trigger (``RevalidationTrigger/foreground(_:)``)
/// listens to.
///
/// The app feeds it from its platform's lifecycle; ``ManualAppLifecycle`` is one it tells by hand (tests, Linux
/// programs, or an app that calls ``ManualAppLifecycle/enterForeground()`` when its scene becomes active).
public protocol AppLifecycle: Sendable {
    /// Emits each time the app comes to the foreground. It never fails.
    var foregrounds: EventStream<Void, Never> { get }
}

/// An app lifecycle told by hand.
///
/// ```swift
/// let lifecycle = ManualAppLifecycle()
/// let revalidation = store.revalidate(on: .foreground(lifecycle))
/// lifecycle.enterForeground()   // observed keys that are stale are fetched anew
/// ```
public final class ManualAppLifecycle: AppLifecycle {
    private let subject = StreamSubject<Void, Never>()

    /// Creates a lifecycle.
    public init() {}

    public var foregrounds: EventStream<Void, Never> {
        subject.stream
    }

    /// Says that the app came to the foreground.
    public func enterForeground() {
        subject.send(())
    }
}
