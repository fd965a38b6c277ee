import Foundation
import FriendsDomain
import Loading

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The story's widget step: a second process (this program, with `--widget PATH`) stands for the app's widget. It
/// composes the friends feature over the app's database and change journal and prints every list its stream shows;
/// the app deletes a friend and logs out, and the widget must show both.
enum WidgetStep {
    static let marker = "widget shows: "

    /// The change journal of the processes sharing `database`: beside it.
    static func journal(beside database: URL) -> URL {
        database.deletingPathExtension().appendingPathExtension("journal")
    }

    /// The widget's side: prints the ids of each list shown (`widget shows: u1,u2`), until it is killed (exits 1
    /// after three minutes, when its parent is gone).
    static func runChild(baseURL: URL, databaseURL: URL) async -> Never {
        let composer = FriendsComposer(
            configuration: .init(
                baseURL: baseURL, databaseURL: databaseURL, changeJournalURL: journal(beside: databaseURL)))
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            FileHandle.standardOutput.write(Data("\(marker)\(list.map(\.id).joined(separator: ","))\n".utf8))
        }
        try? await Task.sleep(for: .seconds(180))
        subscription.cancel()
        exit(1)
    }

    /// What the step saw, for the story's report.
    struct Outcome {
        var showedList = false
        /// From the delete's confirmation to the widget showing the list without the friend.
        var delete: Duration?
        /// From the end of the logout to the widget showing nothing.
        var logout: Duration?
        var problem: String?
    }

    /// Starts the widget over `app`'s database, then deletes `victim` and logs out in `app`.
    static func run(app: FriendsComposer, list: [Friend], victim: Friend.ID, baseURL: URL, databaseURL: URL) async
        -> Outcome
    {
        var outcome = Outcome()
        let widget: ChildProcess
        do {
            widget = try ChildProcess(arguments: [
                "--base-url", baseURL.absoluteString, "--widget", databaseURL.path,
            ])
        } catch {
            outcome.problem = "the widget did not start: \(error)"
            return outcome
        }
        defer { widget.kill() }
        let ids = list.map(\.id)
        guard let shown = await widget.line(where: { shows($0) == ids }) else {
            outcome.problem = "the widget did not show the app's list"
            return outcome
        }
        outcome.showedList = true

        let deleted: Result<Void, any Error> = await withCheckedContinuation { continuation in
            app.deleteFriend(id: victim) { continuation.resume(returning: $0) }
        }
        guard case .success = deleted else {
            outcome.problem = "the delete failed: \(deleted)"
            return outcome
        }
        var start = ContinuousClock.now
        let remaining = ids.filter { $0 != victim }
        guard let afterDelete = await widget.line(from: shown.index + 1, where: { shows($0) == remaining }) else {
            outcome.problem = "the widget still shows \(victim)"
            return outcome
        }
        outcome.delete = ContinuousClock.now - start

        await withCheckedContinuation { continuation in
            FriendsRepository(composer: app).wipe { continuation.resume() }
        }
        start = ContinuousClock.now
        guard await widget.line(from: afterDelete.index + 1, where: { shows($0) == [] }) != nil else {
            outcome.problem = "the widget still shows the list after the logout"
            return outcome
        }
        outcome.logout = ContinuousClock.now - start
        return outcome
    }

    /// The ids a line of the widget names; `nil` for another line.
    private static func shows(_ line: String) -> [Friend.ID]? {
        guard line.hasPrefix(marker) else { return nil }
        return line.dropFirst(marker.count).split(separator: ",").map(String.init)
    }
}
