import Foundation
import Loading
import LoadingScreens

/// One row of the friends list, ready to display.
public struct FriendRowViewModel: Equatable, Sendable, Identifiable {
    /// The friend's id.
    public var id: Friend.ID
    /// The name to show: trimmed, or "Unknown" when empty.
    public var displayName: String
    /// The presence, in words: "Online", "Away", "Offline", or the server's word, capitalized.
    public var statusText: String
    /// Whether to show the online dot.
    public var isOnline: Bool
    /// The avatar to load, if any.
    public var avatarURL: URL?
}

/// Everything a friends list screen needs to draw itself.
public struct FriendsViewState: Equatable, Sendable {
    /// Show a loading indicator.
    public var isLoading: Bool
    /// The rows, in order (kept while refreshing and after a failed refresh).
    public var items: [FriendRowViewModel]
    /// A message for the latest failure, if any.
    public var errorMessage: String?
    /// The text to show instead of the list, when a load finished with no friends.
    public var emptyMessage: String?

    /// Creates a view state.
    public init(isLoading: Bool, items: [FriendRowViewModel], errorMessage: String?, emptyMessage: String?) {
        self.isLoading = isLoading
        self.items = items
        self.errorMessage = errorMessage
        self.emptyMessage = emptyMessage
    }
}

/// Maps domain friends to what a list screen shows, and a stream of loading states to a stream of view states. It
/// knows nothing of stores, SQLite or HTTP: any stream of loading states will do.
///
/// ```swift
/// let viewModel = FriendsViewModel(states: repository.state)
/// let subscription = viewModel.viewStates.sink { state in render(state) }
/// ```
public struct FriendsViewModel: Sendable {
    private let states: EventStream<LoadingState<[Friend]>, Never>
    private let errorMessage: @Sendable (any Error) -> String

    /// Creates a view model over `states`; `errorMessage` words failures (``defaultErrorMessage(for:)`` by default).
    public init(
        states: EventStream<LoadingState<[Friend]>, Never>,
        errorMessage: @escaping @Sendable (any Error) -> String = FriendsViewModel.defaultErrorMessage(for:)
    ) {
        self.states = states
        self.errorMessage = errorMessage
    }

    /// The view states, one per loading state (consecutive duplicates dropped).
    public var viewStates: EventStream<FriendsViewState, Never> {
        let errorMessage = self.errorMessage
        return states.map { Self.viewState(for: $0, errorMessage: errorMessage) }.removeDuplicates()
    }

    /// The view state for one loading state.
    public static func viewState(
        for state: LoadingState<[Friend]>,
        errorMessage: (any Error) -> String = defaultErrorMessage(for:)
    ) -> FriendsViewState {
        let items = (state.value ?? []).map(row(for:))
        let isEmpty: Bool
        switch state {
        case .loaded(let friends): isEmpty = friends.isEmpty
        case .failed(_, let previous?): isEmpty = previous.isEmpty
        default: isEmpty = false
        }
        return FriendsViewState(
            isLoading: state.isLoading,
            items: items,
            errorMessage: state.error.map(errorMessage),
            emptyMessage: isEmpty ? "No friends yet." : nil)
    }

    /// The row for one friend.
    public static func row(for friend: Friend) -> FriendRowViewModel {
        let name = friend.name.trimmingCharacters(in: .whitespacesAndNewlines)
        let statusText: String
        switch friend.status {
        case .online: statusText = "Online"
        case .away: statusText = "Away"
        case .offline: statusText = "Offline"
        default: statusText = friend.status.rawValue.prefix(1).uppercased() + friend.status.rawValue.dropFirst()
        }
        return FriendRowViewModel(
            id: friend.id,
            displayName: name.isEmpty ? "Unknown" : name,
            statusText: statusText,
            isOnline: friend.status == .online,
            avatarURL: friend.avatarURL)
    }

    /// Words for the errors of the friends feature.
    public static func defaultErrorMessage(for error: any Error) -> String {
        switch error {
        case FriendsAPIError.connectivity: "You appear to be offline. Check your connection and try again."
        case FriendsAPIError.notFound: "That friend no longer exists."
        case FriendsAPIError.unexpectedStatus, FriendsAPIError.invalidData, FriendsAPIError.responseTooLarge:
            "The server had a problem. Try again later."
        case is TimeoutError: "The server is taking too long. Try again later."
        default: "Something went wrong. Try again."
        }
    }
}
