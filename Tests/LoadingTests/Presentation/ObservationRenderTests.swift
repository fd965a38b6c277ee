#if canImport(Observation)
    import Foundation
    import Loading
    import LoadingScreens
    import LoadingTestHelpers
    import LoadingTestSupport
    import Observation
    import XCTest

    /// Observation that does not waste renders: equal states are not set again, a selection changes only with its
    /// part, a stream selection skips repeats, and a model moved to another key keeps a placeholder.
    @MainActor
    final class ObservationRenderTests: XCTestCase {
        func test_aRefreshThatBringsAnEqualValue_doesNotChangeTheModel() async {
            let network = KeyedLoaderSpy<String, [String]>()
            let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { network[$0] })
            store.write(["Ada"], for: "friends")
            let model = ResourceModel(store: store, key: "friends")
            let changes = ChangeCounter { _ = model.state }

            store.write(["Ada"], for: "friends")
            store.update("friends") { $0 }

            XCTAssertEqual(changes.count, 0, "an equal state is not set again")
            store.write(["Ada", "Grace"], for: "friends")
            XCTAssertEqual(changes.count, 1)
        }

        func test_aModelMadeInGenericCode_doesNotSetAnEqualStateAgain_fromAnyThread() async {
            let store = Store<String, Int>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Int>() })
            store.write(7, for: "n")
            let model = makeModel(store, "n")  // where the Equatable initializer is not chosen
            let changes = ChangeCounter { _ = model.state }

            store.write(7, for: "n")
            let written = expectation(description: "written on another thread")
            DispatchQueue.global().async {
                store.write(7, for: "n")
                written.fulfill()
            }
            await fulfillment(of: [written], timeout: .watchdog)
            store.write(8, for: "n")  // a change after them: once it shows, they were delivered
            let isShown = await eventuallyOnMainActor { model.value == 8 }
            XCTAssertTrue(isShown)

            XCTAssertEqual(changes.count, 1, "only the change to 8 was set: an equal state is not set again")
        }

        /// A model made where the value's type is generic: Swift picks the initializer without `Equatable`.
        private func makeModel<Value: Sendable>(_ store: Store<String, Value>, _ key: String) -> ResourceModel<Value> {
            ResourceModel(store: store, key: key)
        }

        func test_select_changesOnlyWhenItsPartChanges() async {
            let store = Store<String, Account>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Account>() })
            store.write(Account(name: "Ada", visits: 1), for: "me")
            let model = ResourceModel(store: store, key: "me")
            let name = model.select { $0?.name }
            let changes = ChangeCounter { _ = name.value }

            store.write(Account(name: "Ada", visits: 2), for: "me")
            XCTAssertEqual(changes.count, 0, "the visits changed, not the name")
            XCTAssertEqual(model.value?.visits, 2)

            store.write(Account(name: "Ada L.", visits: 2), for: "me")
            XCTAssertEqual(changes.count, 1)
            XCTAssertEqual(name.value, "Ada L.")
        }

        func test_aReleasedSelection_isNoLongerUpdated() async {
            let store = Store<String, Account>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Account>() })
            let model = ResourceModel(store: store, key: "me")
            var name: Selection<String?>? = model.select { $0?.name }
            weak let released = name

            name = nil
            store.write(Account(name: "Ada", visits: 1), for: "me")

            XCTAssertNil(released)
        }

        func test_streamSelect_skipsRepeatsOfThePart() async {
            let store = Store<String, Account>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Account>() })
            let names = StreamRecorder(store.changes(for: "me").select { $0.value?.name })
            let values = StreamRecorder(store.changes(for: "me").select(\.value))

            store.write(Account(name: "Ada", visits: 1), for: "me")
            store.write(Account(name: "Ada", visits: 2), for: "me")
            store.write(Account(name: "Ada", visits: 2), for: "me")
            store.write(Account(name: "Grace", visits: 2), for: "me")

            XCTAssertEqual(names.values, ["Ada", "Grace"])
            XCTAssertEqual(values.values.map { $0?.visits }, [1, 2, 2], "a repeat of the whole value is skipped")
        }

        func test_show_keepsThePreviousKeysValueAsAPlaceholder_untilTheNewOneArrives() async {
            let network = KeyedLoaderSpy<String, Account>()
            let store = Store<String, Account>(levels: [], fetch: LoaderFamily { network[$0] })
            store.write(Account(name: "Ada", visits: 1), for: "u1")
            let model = ResourceModel(store: store, key: "u1")

            model.show("u2", of: store)

            XCTAssertTrue(model.isPlaceholder)
            XCTAssertEqual(model.state, .loading(previous: Account(name: "Ada", visits: 1)), "no blank screen")
            XCTAssertEqual(network.loadCount(for: "u2"), 1, "the new key is loaded")
            network.complete("u2", with: Account(name: "Grace", visits: 3))
            XCTAssertFalse(model.isPlaceholder)
            XCTAssertEqual(model.state, .loaded(Account(name: "Grace", visits: 3)))

            store.write(Account(name: "Ada (edited)", visits: 1), for: "u1")
            XCTAssertEqual(model.value?.name, "Grace", "the old key no longer reaches the model")
        }

        func test_show_aKeyTheStoreHolds_showsItAtOnce_andAFailureShowsNoPlaceholder() async {
            let network = KeyedLoaderSpy<String, Account>()
            let store = Store<String, Account>(levels: [], fetch: LoaderFamily { network[$0] })
            store.write(Account(name: "Ada", visits: 1), for: "u1")
            store.write(Account(name: "Grace", visits: 1), for: "u2")
            let model = ResourceModel(store: store, key: "u1")

            model.show("u2", of: store)
            XCTAssertEqual(model.value?.name, "Grace")
            XCTAssertFalse(model.isPlaceholder)

            model.show("u3", of: store)
            XCTAssertEqual(model.value?.name, "Grace", "a placeholder while u3 loads")
            network.fail("u3", with: TestError(id: 3))
            XCTAssertFalse(model.isPlaceholder)
            XCTAssertNil(model.value, "the old key's value is not shown beside the new key's failure")
            XCTAssertEqual(model.error as? TestError, TestError(id: 3))
        }

        func test_show_dropsTheOldKeysStateStillOnItsWayToTheMainQueue() async {
            let accounts = Store<String, Account>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Account>() })
            let guests = Store<String, Account>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<Account>() })
            for visits in 1...5 { accounts.write(Account(name: "Ada", visits: visits), for: "u1") }
            guests.write(Account(name: "Grace", visits: 1), for: "g1")
            let model = ResourceModel(store: accounts, key: "u1")

            DispatchQueue.global().sync { accounts.write(Account(name: "Ada", visits: 6), for: "u1") }  // queued
            model.show("g1", of: guests)
            await withCheckedContinuation { done in DispatchQueue.main.async { done.resume() } }  // after it

            XCTAssertEqual(model.value?.name, "Grace", "the old key's queued state is not shown")
        }
    }

    struct Account: Equatable, Sendable {
        var name: String
        var visits: Int
    }

    /// Counts the changes of what `read` reads, as a view observing them would render again.
    @MainActor
    private final class ChangeCounter {
        private(set) var count = 0
        private let read: () -> Void

        init(_ read: @escaping () -> Void) {
            self.read = read
            track()
        }

        private func track() {
            withObservationTracking(read) { [weak self] in
                MainActor.assumeIsolated {
                    self?.count += 1
                    self?.track()
                }
            }
        }
    }
#endif
