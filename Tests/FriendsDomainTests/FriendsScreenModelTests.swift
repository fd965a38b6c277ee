#if canImport(Observation)
    import Foundation
    import FriendsDomain
    import Loading
    import LoadingScreens
    import LoadingTestSupport
    import Observation
    import XCTest

    #if canImport(FoundationNetworking)
        import FoundationNetworking
    #endif

    /// An HTTP client answering every request with one status.
    /// A server that answers every request with `status`, once `answer()` is called: a test checks what shows before
    /// the server's answer without racing it.
    private final class StatusClient: HTTPClient {
        private let status: Int
        private let held = Locked<(answered: Bool, waiting: [@Sendable () -> Void])>((false, []))

        init(status: Int) {
            self.status = status
        }

        func answer() {
            let waiting = held.withLock { held in
                held.answered = true
                return exchange(&held.waiting, with: [])
            }
            for respond in waiting { DispatchQueue.global().async(execute: respond) }
        }

        func perform(
            _ request: URLRequest,
            completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), any Error>) -> Void
        ) -> any CancellationToken {
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: nil, headerFields: nil)!
            let respond: @Sendable () -> Void = { completion(.success((Data(), response))) }
            let answersNow = held.withLock { held in
                if !held.answered { held.waiting.append(respond) }
                return held.answered
            }
            if answersNow { DispatchQueue.global().async(execute: respond) }
            return AnyCancellationToken {}
        }
    }

    // Sample: begin
    @MainActor func makeFriendsScreen(composer: FriendsComposer) -> FriendsScreenModel {
        let screen = FriendsScreenModel(composer: composer)
        screen.load()  // screen.view.isLoading, then screen.view.items
        screen.delete(id: "u1")  // gone at once; back, with screen.toast set, if the server refuses
        return screen
    }
    // Sample: end

    /// A screen bound to the model as UIKit code would: it renders in `withObservationTracking`, again after
    /// each change.
    @MainActor
    private final class BoundScreen {
        let model: FriendsScreenModel
        private(set) var rendered: [[String]] = []

        init(model: FriendsScreenModel) {
            self.model = model
            render()
        }

        private func render() {
            let names = withObservationTracking {
                model.view.items.map(\.displayName)
            } onChange: { [weak self] in
                Task { @MainActor in self?.render() }
            }
            rendered.append(names)
        }
    }

    @MainActor
    final class FriendsScreenModelTests: XCTestCase {

        func test_aScreenBindsToIt_andSeesTheList_aDeleteAtOnce_andARefusedOneComeBackWithAToast() async {
            let base = URL(string: "https://api.example.com")!
            let (ada, grace) = (makeFriend("1", name: "Ada"), makeFriend("2", name: "Grace"))
            let server = StatusClient(status: 500)
            let composer = FriendsComposer(
                memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore.inMemory(),
                remote: AnyLoader { [ada, grace] },
                deleter: RemoteFriendsDeleter(baseURL: base, client: server),
                scheduler: ImmediateScheduler.immediate)
            let bound = BoundScreen(model: FriendsScreenModel(composer: composer))
            let screen = bound.model

            screen.load()
            await until { screen.view.items.count == 2 }
            screen.delete(id: "1")
            // At once, unless the load's states were still being delivered from another thread (the database's
            // save): then right after them. `ResourceModelTests` pins the "at once" alone.
            await until { screen.view.items.map(\.displayName) == ["Grace"] }
            await until { bound.rendered.last == ["Grace"] }
            server.answer()  // the server refuses
            await until { screen.toast != nil }

            XCTAssertEqual(screen.view.items.map(\.displayName), ["Ada", "Grace"], "back when the server refuses")
            XCTAssertEqual(screen.toast, "Could not delete: The server had a problem. Try again later.")
            await until { bound.rendered.last == ["Ada", "Grace"] }
            XCTAssertTrue(bound.rendered.contains(["Grace"]), "the bound screen saw the delete")
            screen.dismissToast()
            XCTAssertNil(screen.toast)
        }

        func test_showsEveryChangeOfTheStore_aLiveUpdateIncluded() async {
            let (ada, grace) = (makeFriend("1", name: "Ada"), makeFriend("2", name: "Grace"))
            let composer = FriendsComposer(
                memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore.inMemory(),
                remote: AnyLoader { [ada] }, scheduler: ImmediateScheduler.immediate)
            let screen = FriendsScreenModel(composer: composer)
            screen.load()
            await until { screen.view.items.count == 1 }

            composer.store.update(.all) { $0?.applying(.upsert(grace)) }

            // At once, unless the load's states were still being delivered from another thread: then right after.
            await until { screen.view.items.map(\.displayName) == ["Ada", "Grace"] }
            await screen.refresh()
            XCTAssertEqual(screen.view.items.map(\.displayName), ["Ada"], "a refresh shows the server's list")
        }

        func test_theDocumentedScreen() async {
            let composer = FriendsComposer(
                memoryStore: InMemoryFriendsStore(), databaseStore: SQLiteFriendsStore.inMemory(),
                remote: AnyLoader { [makeFriend("u1"), makeFriend("u2")] }, scheduler: ImmediateScheduler.immediate)
            let screen = makeFriendsScreen(composer: composer)
            await until { screen.toast != nil }
            XCTAssertEqual(screen.toast, "Could not delete: Something went wrong. Try again.", "no deleter here")
        }

        private func until(
            _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
        ) async {
            let held = await eventuallyOnMainActor(condition)
            XCTAssertTrue(held, "the condition did not hold within the watchdog (60 s)", file: file, line: line)
        }
    }
#endif
