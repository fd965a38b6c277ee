import Foundation
import Loading
import LoadingTestSupport
import XCTest

// The code sample of `ProcessSharing`'s doc comment, as written there, with the few names it assumes; two stores
// made by it stand for an app and its widget.

private final class SharingAPI: Sendable {
    func friend(_ id: String) -> AnyLoader<Friend> {
        AnyLoader { completion in
            completion(.success(Friend(id: id, name: "Ada")))
            return AnyCancellationToken {}
        }
    }
}

private let api = SharingAPI()

final class SharingSamplesTests: XCTestCase {
    private var groupFolder: URL!

    override func setUpWithError() throws {
        groupFolder = try makeTemporaryFolder("group")
    }

    private func makeStore() throws -> Store<String, Friend> {
        let sharedDisk = DiskCache<String, Friend>(directory: groupFolder.appendingPathComponent("friends"))
        // Sample: begin
        let store = Store(
            levels: [.cache(MemoryCache(), name: "memory"), .cache(sharedDisk, name: "shared")],
            fetch: LoaderFamily { (id: String) in api.friend(id) },
            sharing: try .journal(at: groupFolder.appendingPathComponent("friends.journal"), sharedLevel: "shared"))
        // Sample: end
        return store
    }

    func test_theSharingSample_showsWhatTheAppWritesInTheWidget_andForgetsItOnTheAppsLogout() throws {
        let app = try makeStore()
        let widget = try makeStore()
        let shown = Locked<[String?]>([])
        let subscription = widget.changes(for: "u1").sink { response in
            shown.withLock { $0.append(response.value?.name) }
        }
        defer { subscription.cancel() }

        app.write(Friend(id: "u1", name: "Ada L."), for: "u1")
        XCTAssertTrue(eventually { shown.withLock { $0.last } == "Ada L." })

        app.clear()
        XCTAssertTrue(eventually { shown.withLock { $0.last } == .some(nil) })
    }

    func test_aJournalThatCannotBeOpened_isATypedErrorThatReadsAsASentence() {
        let nowhere = groupFolder.appendingPathComponent("missing/friends.journal")
        XCTAssertThrowsError(try ProcessSharing<String>.journal(at: nowhere, sharedLevel: "shared")) { error in
            guard let error = error as? ProcessSharingError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.file, nowhere)
            XCTAssertEqual(
                error.localizedDescription,
                "The change journal \(nowhere.path) could not be opened, so the store cannot share its changes with "
                    + "other processes: No such file or directory.")
        }
    }
}
