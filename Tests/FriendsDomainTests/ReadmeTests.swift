import Foundation
import FriendsDomain
import LoadingScreens
import LoadingTestHelpers
import XCTest

@testable import Loading

/// The README's FriendsDomain samples, compiled and run as written.
final class ReadmeTests: XCTestCase {
    func test_readmeComposerSnippetRuns() {
        let applicationSupport = FileManager.default.temporaryDirectory.appendingPathComponent(
            "readme-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: applicationSupport, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: applicationSupport) }

        // Sample: begin
        let composer = FriendsComposer(
            configuration: .init(
                baseURL: URL(string: "https://api.example.com/v1")!,
                databaseURL: applicationSupport.appendingPathComponent("friends.sqlite"),
                maxAge: .seconds(300),  // cache policy
                retry: .exponential(initial: .milliseconds(200), maxDelay: .seconds(2), maxAttempts: 3),
                timeout: .seconds(10),  // per network attempt
                saveDebounce: .milliseconds(500)))  // database saves during updates

        composer.friendsLoader.load { result in print(result) }  // one load
        composer.friend(id: "u1").load { result in print(result) }  // one friend, from the list or the API
        let live = composer.friendsStream().sink { _ in
        } receiveValue: { friends in
            print(friends)
        }  // and updates
        // Sample: end

        // There is no network here: the loads fail, on the main queue. The live updates' request is cancelled only
        // once it has surely started: FoundationNetworking on Linux can crash on a task cancelled as it starts.
        waitUntilRequestsStarted()
        live.cancel()
        XCTAssertFalse(live.isActive)
    }

    func test_readmePresentationSnippetRuns() {
        let memory = InMemoryFriendsStore()
        memory.replaceAll(with: [makeFriend("u1"), makeFriend("u2")], timestamp: Date()) { _ in }
        let composer = FriendsComposer(
            memoryStore: memory, databaseStore: SQLiteFriendsStore.inMemory(), remote: AnyLoader { [] })

        // Sample: begin
        let repository = FriendsRepository(composer: composer)
        let viewModel = FriendsViewModel(states: repository.state)
        let screen = viewModel.viewStates.sink { state in
            print(state.isLoading, state.items.map(\.displayName), state.errorMessage ?? "")
        }
        let toasts = repository.events.sink { event in
            if case .deletionFailed(_, let error) = event { print("Could not delete: \(error)") }
        }
        repository.load()
        repository.remove(id: "u1", optimistic: true)  // published at once; restored if the server refuses
        repository.wipe()  // logout: idle, memory and database emptied, pending saves cancelled

        let sections = composer.sections().sections.sink { sections in
            // Online, All friends, Recently updated
            for section in sections { print(section.title, section.state.value?.count ?? 0) }
        }
        // Sample: end

        spinMainQueue { repository.currentState == .loaded([]) }
        XCTAssertEqual(
            repository.currentState, .loaded([]),
            "the sections loaded the list again after the wipe (the network has none), and the repository shows it")
        for element in [screen, toasts, sections] { element.cancel() }
    }
}
