#if canImport(Observation)
    import Foundation
    import Loading
    import LoadingScreens
    import LoadingTestSupport
    import Observation
    import XCTest

    /// A screen's view model on the main actor binds to the model as SwiftUI or UIKit would: it reads the model's
    /// properties in `withObservationTracking` and renders again after each change. No `assumeIsolated` anywhere.
    @MainActor
    private final class RenderingScreen {
        let model: ResourceModel<[String]>
        private(set) var rendered: [LoadingState<[String]>] = []

        init(model: ResourceModel<[String]>) {
            self.model = model
            render()
        }

        private func render() {
            let state = withObservationTracking {
                model.state
            } onChange: { [weak self] in
                Task { @MainActor in self?.render() }  // onChange runs before the change: render after it
            }
            rendered.append(state)
        }
    }

    /// An API whose renames wait for the test to answer them.
    private final class RenamingAPI: Sendable {
        let commits = LoaderSpy<Void>()
        func rename(_ id: String, to name: String) -> LoaderSpy<Void> { commits }
    }

    @MainActor
    final class ResourceModelTests: XCTestCase {
        func test_aMainActorScreen_observesLoading_loaded_refreshed_failedKeepingTheValue() async {
            let network = KeyedLoaderSpy<String, [String]>()
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { network[$0] })
            let screen = RenderingScreen(model: ResourceModel(store: store, key: "friends"))

            screen.model.load()
            await rendered(screen, count: 2)
            network.complete("friends", with: ["Ada"])
            await rendered(screen, count: 3)
            let refreshed = Task { await screen.model.refresh() }
            await rendered(screen, count: 4)
            network.complete("friends", with: ["Ada", "Grace"])
            await refreshed.value
            await rendered(screen, count: 5)
            let failed = Task { await screen.model.refresh() }
            await rendered(screen, count: 6)
            network.fail("friends", with: TestError(id: 1))
            await failed.value
            await rendered(screen, count: 7)

            XCTAssertEqual(
                screen.rendered,
                [
                    .idle, .loading(previous: nil), .loaded(["Ada"]),
                    .loading(previous: ["Ada"]), .loaded(["Ada", "Grace"]),
                    .loading(previous: ["Ada", "Grace"]), .failed(TestError(id: 1), previous: ["Ada", "Grace"]),
                ])
            XCTAssertEqual(screen.model.value, ["Ada", "Grace"], "the value stays shown after the failure")
            XCTAssertEqual(screen.model.error as? TestError, TestError(id: 1))
            XCTAssertFalse(screen.model.isLoading)
        }

        func test_followsEveryChangeOfTheKey_liveUpdatesAndOptimisticEditsIncluded() async {
            let network = KeyedLoaderSpy<String, [String]>()
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { network[$0] })
            store.write(["Ada"], for: "friends")
            let model = ResourceModel(store: store, key: "friends")
            XCTAssertEqual(model.state, .loaded(["Ada"]), "what the store shows, at once")

            let commit = LoaderSpy<Void>()
            DispatchQueue.global().async { store.update("friends") { $0.map { $0 + ["Grace"] } } }  // a live update
            await until { model.value == ["Ada", "Grace"] }
            model.mutate({ $0?.filter { $0 != "Ada" } }, commit: commit, completion: { _ in })
            XCTAssertEqual(model.value, ["Grace"], "an optimistic edit shows at once")
            commit.fail(with: TestError(id: 2))
            XCTAssertEqual(model.value, ["Ada", "Grace"], "and is undone when refused")
        }

        func test_aChangeMadeOnTheMainThread_showsAtOnce_evenBehindOtherWorkQueuedOnTheMainQueue() {
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
            store.write(["Ada", "Grace"], for: "friends")
            let model = ResourceModel(store: store, key: "friends")
            let otherScreenRendered = Locked(false)
            DispatchQueue.global().sync {  // another screen's delivery, queued on the main queue ahead
                MainQueueScheduler.main.schedule { otherScreenRendered.withLock { $0 = true } }
            }

            store.update("friends") { $0?.filter { $0 != "Ada" } }

            XCTAssertFalse(otherScreenRendered.withLock { $0 }, "still queued")
            XCTAssertEqual(model.value, ["Grace"], "shown before the update returns")
        }

        func test_asyncRefresh_returnsOnceTheFreshValueIsShown() async {
            let network = KeyedLoaderSpy<String, [String]>()
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { network[$0] })
            let model = ResourceModel(store: store, key: "friends")
            DispatchQueue.global().async {  // the server answers once asked
                _ = eventually { network.loadCount(for: "friends") == 1 }
                network.complete("friends", with: ["Fresh"])
            }

            await model.refresh()

            XCTAssertEqual(model.state, .loaded(["Fresh"]))
        }

        func test_showsLoading_whileTheStoreFetchesTheKeyForSomeoneElse() async {
            let network = KeyedLoaderSpy<String, [String]>()
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { network[$0] })
            store.write(["Ada"], for: "friends")
            let model = ResourceModel(store: store, key: "friends")

            store.invalidate("friends")  // observed by the model: fetched anew at once
            await until { model.isLoading }
            XCTAssertEqual(model.state, .loading(previous: ["Ada"]))
            network.complete("friends", with: ["Ada", "Grace"])

            await until { !model.isLoading }
            XCTAssertEqual(model.state, .loaded(["Ada", "Grace"]))
        }

        func test_awaitMutate_showsAtOnce_returnsOnceConfirmed_throwsWhenRefused_andCancelledIsUndone() async throws {
            let store = Store<String, String>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<String>() })
            store.write("Ada", for: "u1")
            let model = ResourceModel(store: store, key: "u1")
            let api = RenamingAPI()

            let renaming = Task {
                // Sample: begin
                try await model.mutate({ _ in "Ada L." }, commit: api.rename("u1", to: "Ada L."))
                // Sample: end
            }
            await until { api.commits.loadCount == 1 }
            XCTAssertEqual(model.value, "Ada L.", "shown at once")
            api.commits.complete(with: (), at: 0)
            try await renaming.value

            let refused = Task { try await model.mutate({ _ in "Ada B." }, commit: api.commits) }
            await until { api.commits.loadCount == 2 }
            XCTAssertEqual(model.value, "Ada B.")
            api.commits.fail(with: URLError(.badServerResponse), at: 1)
            do {
                try await refused.value
                XCTFail("a refused change throws")
            } catch {
                XCTAssertEqual((error as? URLError)?.code, .badServerResponse)
            }
            XCTAssertEqual(model.value, "Ada L.", "undone")

            let cancelled = Task { try await model.mutate({ _ in "Ada C." }, commit: api.commits) }
            await until { api.commits.loadCount == 3 }
            cancelled.cancel()
            do {
                try await cancelled.value
                XCTFail("a cancelled change throws")
            } catch {
                XCTAssertTrue(error is CancellationError)
            }
            XCTAssertEqual(api.commits.cancelledRequests, [2], "its commit is cancelled")
            await until { model.value == "Ada L." }
        }

        func test_overALoaderAlone() async {
            let loader = LoaderSpy<[String]>()
            let model = ResourceModel(loader: loader)
            model.load()
            loader.complete(with: ["Ada"])
            XCTAssertEqual(model.state, .loaded(["Ada"]))
        }

        private func rendered(_ screen: RenderingScreen, count: Int) async {
            await until { screen.rendered.count >= count }
        }

        private func until(
            _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
        ) async {
            let held = await eventuallyOnMainActor(condition)
            XCTAssertTrue(held, "the condition did not hold within the watchdog (60 s)", file: file, line: line)
        }
    }
#endif

#if canImport(Observation)
    struct Ad: Sendable, Equatable {
        var text: String
    }

    // Sample: begin
    @MainActor @Observable final class HomeScreen {
        let friends: ResourceModel<[Friend]>
        let ads: ResourceModel<[Ad]>

        init(friends: some Loader<[Friend]>, ads: some Loader<[Ad]>) {
            self.friends = ResourceModel(loader: friends)
            self.ads = ResourceModel(loader: ads)
        }

        func appeared() {
            friends.load()
            ads.load()
        }

        func reloadAds() async {
            await ads.refresh()  // this section alone
        }
    }
    // Sample: end

    @MainActor
    final class SectionModelsTests: XCTestCase {
        func test_sectionsOfDifferentTypes_loadAndFailOnTheirOwn_andOneReloadsAlone() async {
            let friends = LoaderSpy<[Friend]>()
            let ads = LoaderSpy<[Ad]>()
            let screen = HomeScreen(friends: friends, ads: ads)

            screen.appeared()
            ads.fail(with: TestError(id: 1))
            XCTAssertEqual(screen.ads.error as? TestError, TestError(id: 1), "the ads section fails alone")
            XCTAssertTrue(screen.friends.isLoading, "while friends still load")
            friends.complete(with: [Friend(id: "u1", name: "Ada")])
            XCTAssertEqual(screen.friends.value, [Friend(id: "u1", name: "Ada")])

            let reloading = Task { await screen.reloadAds() }
            await until { ads.loadCount == 2 }
            ads.complete(with: [Ad(text: "Try Loading")])
            await reloading.value

            XCTAssertEqual(screen.ads.value, [Ad(text: "Try Loading")])
            XCTAssertEqual(friends.loadCount, 1, "reloading one section leaves the others alone")
        }

        private func until(
            _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line
        ) async {
            let held = await eventuallyOnMainActor(condition)
            XCTAssertTrue(held, "the condition did not hold within the watchdog (60 s)", file: file, line: line)
        }
    }
#endif
