#if canImport(Observation)
    import Foundation
    import Loading
    import LoadingScreens
    import Observation

    /// The friends list screen as SwiftUI views and UIKit controllers bind to it: an `@Observable` model on the main
    /// actor, over the composition's store.
    ///
    /// ```swift
    /// @MainActor func makeFriendsScreen(composer: FriendsComposer) -> FriendsScreenModel {
    ///     let screen = FriendsScreenModel(composer: composer)
    ///     screen.load()                  // screen.view.isLoading, then screen.view.items
    ///     screen.delete(id: "u1")        // gone at once; back, with screen.toast set, if the server refuses
    ///     return screen
    /// }
    /// ```
    /// Every change of the store shows: a live update, a refresh, a delete from another screen, a logout.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Observable
    public final class FriendsScreenModel {
        /// What the list shows: rows, loading, an error message, the empty text.
        public var view: FriendsViewState {
            FriendsViewModel.viewState(for: list.state)
        }

        /// A message about the last refused deletion, for a toast; `nil` once dismissed.
        public private(set) var toast: String?

        /// The loading resource the screen shows: its state, value and error.
        public let list: ResourceModel<[Friend]>

        @ObservationIgnored private let composer: FriendsComposer

        /// Creates the screen model of a composition.
        public init(composer: FriendsComposer) {
            self.composer = composer
            list = ResourceModel(store: composer.store, key: .all, policy: composer.listPolicy)
        }

        /// Loads the friends, joining a load in flight.
        public func load() {
            list.load()
        }

        /// Fetches the friends anew, and returns once they are shown (for `refreshable`).
        public func refresh() async {
            await list.refresh()
        }

        /// Deletes a friend through the composition (``FriendsComposer/deleteFriend(id:completion:)``): gone at
        /// once, kept until the network allows, back with ``toast`` set when the server refuses (other deletes made
        /// meanwhile stay).
        public func delete(id: Friend.ID) {
            composer.deleteFriend(id: id) { [weak self] result in
                // A logout's wipe undoes the delete: not a failure to tell the user about.
                guard case .failure(let error) = result, (error as? StoreError) != .cleared else { return }
                let message = "Could not delete: \(FriendsViewModel.defaultErrorMessage(for: error))"
                Task { @MainActor in self?.toast = message }
            }
        }

        /// Forgets the toast.
        public func dismissToast() {
            toast = nil
        }
    }
#endif
