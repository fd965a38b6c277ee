import Foundation
import Loading

/// Loads friends from a store and saves loaded friends to it: one type is both a ``Loader`` and a ``Cache``, so a
/// composition can read a store and write to it.
///
/// ```swift
/// let memory = LocalFriendsLoader(store: InMemoryFriendsStore(), maxAge: .seconds(300))
/// let database = LocalFriendsLoader(store: SQLiteFriendsStore(fileURL: url), maxAge: .seconds(86_400))
/// let friends = memory.fallback(to: database.caching(to: memory))
/// ```
/// A load fails with ``LocalFriendsLoader/Error/empty`` when nothing is stored, and with
/// ``LocalFriendsLoader/Error/expired(savedAt:)`` when what is stored is older than `maxAge`, so that a fallback
/// runs. An empty list that was saved is a valid value.
public struct LocalFriendsLoader: Loader, Cache {
    /// Why a store could not provide friends.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible, LocalizedError {
        /// Nothing is stored.
        case empty
        /// What is stored was saved at `savedAt`, longer ago than the cache policy allows (or, with the clock set
        /// back since, after now).
        case expired(savedAt: Date)

        public var description: String {
            switch self {
            case .empty: "No friends are stored in this cache."
            case .expired(let savedAt): "The stored friends, saved at \(savedAt), are too old to show."
            }
        }

        public var errorDescription: String? { description }
    }

    private let store: any FriendsStore
    /// The max age in seconds, computed once.
    private let maxAge: TimeInterval?
    private let currentDate: @Sendable () -> Date

    /// Creates a loader over `store`. Stored friends older than `maxAge` (measured with `currentDate`) count as
    /// expired; with `maxAge` `nil` they never expire.
    public init(
        store: any FriendsStore, maxAge: Duration? = nil, currentDate: @escaping @Sendable () -> Date = Date.init
    ) {
        self.store = store
        self.maxAge = maxAge.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        self.currentDate = currentDate
    }

    @discardableResult
    public func load(completion: @escaping LoadCompletion<[Friend]>) -> any CancellationToken {
        let token = AnyCancellationToken {}
        store.retrieve { [self] result in
            guard !token.isCancelled else { return }
            completion(
                result.flatMap { cached in
                    guard let cached else { return .failure(Error.empty) }
                    guard isFresh(cached.timestamp) else { return .failure(Error.expired(savedAt: cached.timestamp)) }
                    return .success(cached.friends)
                })
        }
        return token
    }

    /// Replaces the stored friends with `friends`, stamped with the current date.
    public func save(_ friends: [Friend], completion: @escaping @Sendable (Result<Void, any Swift.Error>) -> Void) {
        store.replaceAll(with: friends, timestamp: currentDate(), completion: completion)
    }

    /// Deletes stored friends that are expired or cannot be read (a corrupt database), so that the next launch
    /// starts clean. Completes with the deletion's outcome (success when nothing needed deleting).
    public func validateCache(completion: @escaping @Sendable (Result<Void, any Swift.Error>) -> Void = { _ in }) {
        store.retrieve { [self] result in
            switch result {
            case .success(let cached?) where !isFresh(cached.timestamp):
                store.deleteAll(completion: completion)
            case .failure:
                store.deleteAll(completion: completion)
            case .success:
                completion(.success(()))
            }
        }
    }

    private func isFresh(_ timestamp: Date) -> Bool {
        guard let maxAge else { return true }
        let age = currentDate().timeIntervalSince(timestamp)
        // Saved "in the future" (the clock was ahead then, or was set back since): expired, not fresh for as long
        // as the clock was wrong.
        return age >= 0 && age < maxAge
    }
}
