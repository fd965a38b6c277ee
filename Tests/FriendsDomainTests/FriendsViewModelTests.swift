import Foundation
import FriendsDomain
import Loading
import LoadingScreens
import LoadingTestSupport
import XCTest

final class FriendsViewModelTests: XCTestCase {
    func test_mapsFriendsToRows() {
        let friends = [
            Friend(
                id: "1", name: "  Ada Lovelace ", status: .online, avatarURL: URL(string: "https://x.test/a.png"),
                updatedAt: fixedDate),
            Friend(id: "2", name: "", status: .away, updatedAt: fixedDate),
            Friend(id: "3", name: "Grace", status: .offline, updatedAt: fixedDate),
            Friend(id: "4", name: "Linus", status: "busy", updatedAt: fixedDate),
        ]
        let rows = FriendsViewModel.viewState(for: .loaded(friends)).items

        XCTAssertEqual(rows.map(\.displayName), ["Ada Lovelace", "Unknown", "Grace", "Linus"])
        XCTAssertEqual(rows.map(\.statusText), ["Online", "Away", "Offline", "Busy"])
        XCTAssertEqual(rows.map(\.isOnline), [true, false, false, false])
        XCTAssertEqual(rows[0].avatarURL, URL(string: "https://x.test/a.png"))
    }

    func test_mapsEveryLoadingStateToWhatTheScreenShows() {
        let friends = [makeFriend("1")]
        let row = FriendsViewModel.row(for: friends[0])
        XCTAssertEqual(
            FriendsViewModel.viewState(for: .idle),
            FriendsViewState(isLoading: false, items: [], errorMessage: nil, emptyMessage: nil))
        XCTAssertEqual(
            FriendsViewModel.viewState(for: .loading(previous: nil)),
            FriendsViewState(isLoading: true, items: [], errorMessage: nil, emptyMessage: nil))
        XCTAssertEqual(
            FriendsViewModel.viewState(for: .loading(previous: friends)),
            FriendsViewState(isLoading: true, items: [row], errorMessage: nil, emptyMessage: nil))
        XCTAssertEqual(
            FriendsViewModel.viewState(for: .loaded([])),
            FriendsViewState(isLoading: false, items: [], errorMessage: nil, emptyMessage: "No friends yet."))
        XCTAssertEqual(
            FriendsViewModel.viewState(
                for: .failed(FriendsAPIError.connectivity(underlying: AnyError()), previous: friends)),
            FriendsViewState(
                isLoading: false, items: [row],
                errorMessage: "You appear to be offline. Check your connection and try again.", emptyMessage: nil))
        XCTAssertEqual(
            FriendsViewModel.viewState(for: .failed(FriendsAPIError.invalidData, previous: nil)).errorMessage,
            "The server had a problem. Try again later.")
    }

    func test_viewStates_followTheLoadingStatesWithoutDuplicates() {
        let states = StreamSubject<LoadingState<[Friend]>, Never>()
        let recorder = StreamRecorder(FriendsViewModel(states: states.stream).viewStates)
        states.send(.loading(previous: nil))
        states.send(.loading(previous: nil))
        states.send(.loaded([makeFriend("1")]))

        XCTAssertEqual(recorder.values.map(\.isLoading), [true, false])
        XCTAssertEqual(recorder.values.last?.items.map(\.id), ["1"])
    }
}
