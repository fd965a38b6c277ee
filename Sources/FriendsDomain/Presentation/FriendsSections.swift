import Foundation
import Loading
import LoadingScreens

extension FriendsComposer {
    /// A sectioned screen for friends: "Online" and "All friends" from the same composition, and
    /// "Recently updated" from a second source (the database, most recent first). Each section loads on its own.
    ///
    /// ```swift
    /// let subscription = composer.sections().sections.sink { sections in render(sections) }
    /// ```
    public func sections(recentlyUpdatedLimit: Int = 5) -> SectionedSource<[Friend]> {
        let all = friendsLoader
        return SectionedSource([
            TitledSource(title: "Online", loader: all.map { $0.filter { $0.status == .online } }),
            TitledSource(title: "All friends", loader: all),
            TitledSource(title: "Recently updated", loader: recentlyUpdatedLoader(limit: recentlyUpdatedLimit)),
        ])
    }

    /// The friends the database holds, most recently updated first, at most `limit`: a second source, independent
    /// of the main chain. Delivered on the main queue.
    public func recentlyUpdatedLoader(limit: Int) -> AnyLoader<[Friend]> {
        LocalFriendsLoader(store: databaseStore)
            .map { friends in Array(friends.sorted { $0.updatedAt > $1.updatedAt }.prefix(limit)) }
            .dispatchOnMainQueue()
            .eraseToAnyLoader()
    }
}
