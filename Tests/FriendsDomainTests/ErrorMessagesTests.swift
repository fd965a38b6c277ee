import Foundation
import FriendsDomain
import Loading
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every public error tells a person what happened: its description is a sentence, not a type or case name, and
/// Foundation's `localizedDescription` says the same.
final class ErrorMessagesTests: XCTestCase {
    func test_everyPublicErrorDescribesWhatHappened() {
        let errors: [(any Error, mentions: String)] = [
            (LocalFriendsLoader.Error.empty, "No friends are stored"),
            (LocalFriendsLoader.Error.expired(savedAt: Date(timeIntervalSince1970: 0)), "too old"),
            (ServerSentEventsFriendsUpdates.StreamEnded(), "ended the live updates"),
            (ServerSentEventsFriendsUpdates.UnexpectedStatus(statusCode: 503), "status 503"),
            (FriendsAPIError.connectivity(underlying: URLError(.timedOut)), "the request timed out"),
            (FriendsAPIError.connectivity(underlying: URLError(.cannotConnectToHost)), "refused the connection"),
            (FriendsAPIError.unexpectedStatus(418), "status 418"),
            (FriendsAPIError.invalidData, "not a valid friends list"),
            (FriendsAPIError.notFound, "does not exist"),
            (FriendsAPIError.invalidID(""), "not a valid friend id"),
            (FriendsAPIError.busy(status: 429, retryAfter: .seconds(3)), "retry after"),
            (FriendsRepository.DeletionUnavailable(), "no deleter"),
            (URLSessionHTTPClient.UnexpectedResponse(), "not an HTTP response"),
        ]
        for (error, mentions) in errors {
            let description = String(describing: error)
            XCTAssertTrue(description.contains(mentions), "\(type(of: error)): \(description)")
            XCTAssertFalse(description.contains("(null)"), description)
            XCTAssertFalse(description.contains("Error Domain="), description)
            XCTAssertEqual(error.localizedDescription, description, "\(type(of: error))")
        }
    }

    func test_repositoryWithoutADeleter_failsWithAPublicErrorCallersCanMatch() {
        let composer = FriendsComposer(
            memoryStore: InMemoryFriendsStore(), databaseStore: InMemoryFriendsStore(),
            remote: AnyLoader { throw URLError(.notConnectedToInternet) }, scheduler: ImmediateScheduler.immediate)
        let sut = FriendsRepository(composer: composer, scheduler: ImmediateScheduler.immediate)
        let events = Locked<[FriendsRepository.Event]>([])
        let subscription = sut.events.sink { event in events.withLock { $0.append(event) } }

        sut.remove(id: "u1", optimistic: false)

        guard case .deletionFailed(_, let error)? = events.withLock({ $0 }).first else {
            return XCTFail("expected a failed deletion, got \(events.withLock { $0 })")
        }
        XCTAssertTrue(error is FriendsRepository.DeletionUnavailable)
        withExtendedLifetime(subscription) {}
    }
}
