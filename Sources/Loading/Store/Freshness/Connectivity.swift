/// Tells whether the network can be reached: what a store's ``NetworkMode``, the reconnect trigger
/// (``RevalidationTrigger/reconnect(_:)``) and a ``MutationQueue`` wait on.
///
/// The app feeds it from the platform; ``ManualConnectivity`` is one it sets by hand (tests, Linux programs, or an
/// app that calls ``ManualConnectivity/setOnline(_:)`` from its path monitor's update handler).
public protocol ConnectivityMonitor: Sendable {
    /// Whether the network can be reached now.
    var isOnline: Bool { get }

    /// ``isOnline`` now, then each time it changes. It never fails.
    var onlineStates: EventStream<Bool, Never> { get }
}

/// Connectivity set by hand.
///
/// ```swift
/// let connectivity = ManualConnectivity(isOnline: false)
/// let friends = Store(levels: [], fetch: LoaderFamily { (id: String) in api.friend(id) },
///                     network: .waitsForNetwork(connectivity))
/// connectivity.setOnline(true)   // reads waiting for the network start their fetches
/// ```
/// Safe to set from any thread; observers receive each change once, in order.
public final class ManualConnectivity: ConnectivityMonitor {
    private let subject: CurrentValueStreamSubject<Bool, Never>

    /// Creates connectivity that is online or not.
    public init(isOnline: Bool = true) {
        subject = CurrentValueStreamSubject(isOnline)
    }

    public var isOnline: Bool {
        subject.value
    }

    public var onlineStates: EventStream<Bool, Never> {
        subject.stream.removeDuplicates()
    }

    /// Says whether the network can be reached; observers hear of a change only.
    public func setOnline(_ isOnline: Bool) {
        subject.send(isOnline)
    }
}

/// The failure of a load that was not attempted because the network could not be reached (a store whose
/// ``NetworkMode`` answers from the cache while offline).
public struct OfflineError: Error, Equatable, CustomStringConvertible {
    /// Creates the error.
    public init() {}

    public var description: String {
        "The network cannot be reached: nothing was requested."
    }
}
