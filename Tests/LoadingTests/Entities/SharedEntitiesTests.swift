import Foundation
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

@testable import Loading

/// Entities shared by the keys of two stores (lists of people, and one person's detail): an edit made anywhere
/// reaches every key holding the entity, once; a refused change is undone everywhere; which copy wins is stated.
final class SharedEntitiesTests: XCTestCase {
    private struct Person: Identifiable, Equatable, Sendable {
        let id: String
        var name: String
        var version = 1
    }

    private let ada = Person(id: "ada", name: "Ada")
    private let grace = Person(id: "grace", name: "Grace")
    private var subscriptions: [any CancellationToken] = []

    override func tearDown() {
        for subscription in subscriptions { subscription.cancel() }
        subscriptions = []
    }

    /// A store of lists keyed by number; each list's fetch answers with what `lists` gives.
    private func makeListStore(
        _ entities: SharedEntities<Person>, level: MemoryCache<Int, [Person]> = MemoryCache(),
        lists: @escaping @Sendable (Int) -> AnyLoader<[Person]>
    ) -> Store<Int, [Person]> {
        Store(
            levels: [.cache(level, name: "memory")], fetch: LoaderFamily { lists($0) },
            entities: entities.held(in: .elements))
    }

    private func makeDetailStore(
        _ entities: SharedEntities<Person>, detail: @escaping @Sendable (String) -> AnyLoader<Person>
    ) -> Store<String, Person> {
        Store(
            levels: [.cache(MemoryCache(), name: "memory")], fetch: LoaderFamily { detail($0) },
            entities: entities.held(in: .whole))
    }

    /// Lists (each fetching Ada and Grace) and details (fetching Ada) sharing `people`, with lists `0..<lists` and
    /// Ada's detail read.
    private func makeListsAndDetail(
        lists count: Int
    ) -> (people: SharedEntities<Person>, lists: Store<Int, [Person]>, details: Store<String, Person>) {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = makeListStore(people) { _ in Self.answering([ada, grace]) }
        let details = makeDetailStore(people) { _ in Self.answering(ada) }
        for key in 0..<count { XCTAssertNotNil(read(key, in: lists)) }
        XCTAssertNotNil(read("ada", in: details))
        return (people, lists, details)
    }

    private static func answering<Value: Sendable>(_ value: Value) -> AnyLoader<Value> {
        AnyLoader { completion in
            completion(.success(value))
            return AnyCancellationToken {}
        }
    }

    /// Every value `store` shows for `key` from now on.
    private func observe<Key: Hashable & Sendable, Value: Sendable>(
        _ key: Key, in store: Store<Key, Value>
    ) -> Locked<[Value?]> {
        let shown = Locked<[Value?]>([])
        let subscription = store.changes(for: key).sink { response in shown.withLock { $0.append(response.value) } }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return shown
    }

    /// What a screen of `key` shows: the value read, then every change.
    private func show<Key: Hashable & Sendable, Value: Sendable>(
        _ key: Key, in store: Store<Key, Value>
    ) -> Locked<[Value?]> {
        let shown = Locked<[Value?]>([])
        let subscription = store.stream(for: key).sink { _ in
        } receiveValue: { response in
            shown.withLock { $0.append(response.value) }
        }
        subscriptions.append(AnyCancellationToken { subscription.cancel() })
        return shown
    }

    func test_anEditOfAnEntity_reachesEveryKeyAndStoreHoldingIt_withOnePublicationEach() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = makeListStore(people) { number in
            Self.answering(number.isMultiple(of: 2) ? [ada, grace] : [grace])
        }
        let details = makeDetailStore(people) { _ in Self.answering(ada) }
        // Feeds a page at a time: Grace on the first page, Ada on the second.
        let feeds = PagedStore(
            levels: [.cache(MemoryCache<Int, PagedList<Person, Int>>(), name: "memory")],
            entities: people.held(in: .items())
        ) { (_: Int, cursor: Int?) in
            Self.answering(cursor == nil ? Page(items: [grace], nextCursor: 2) : Page(items: [ada], nextCursor: nil))
        }
        let keys = 0..<2_000  // 1,000 lists hold Ada
        let feedKeys = 0..<100
        for feed in feedKeys {
            feeds.nextPage(of: feed).load { _ in }
            feeds.nextPage(of: feed).load { _ in }
        }
        let shown = keys.map { show($0, in: lists) }
        let feedsShown = feedKeys.map { show($0, in: feeds.store) }
        let detailShown = show("ada", in: details)
        XCTAssertTrue(eventually { shown.allSatisfy { $0.withLock { !$0.isEmpty } } }, "each observer saw its value")
        XCTAssertTrue(eventually { feedsShown.allSatisfy { $0.withLock { $0.last??.items == [grace, ada] } } })
        let before = shown.map { $0.withLock { $0.count } }
        let feedsBefore = feedsShown.map { $0.withLock { $0.count } }

        let renamed = Person(id: "ada", name: "Ada Lovelace", version: 2)
        people.update(renamed)

        for key in keys {
            let published = shown[key].withLock { Array($0.dropFirst(before[key])) }
            if key.isMultiple(of: 2) {
                XCTAssertEqual(published, [[renamed, grace]], "list \(key): one publication with the new copy")
            } else {
                XCTAssertEqual(published, [], "list \(key) does not hold Ada")
            }
        }
        for feed in feedKeys {
            let published = feedsShown[feed].withLock { Array($0.dropFirst(feedsBefore[feed])) }
            XCTAssertEqual(published.map { $0?.items }, [[grace, renamed]], "feed \(feed): one publication, its page")
        }
        XCTAssertEqual(detailShown.withLock { $0.last }, renamed)
        XCTAssertEqual(people.entity("ada"), renamed)
    }

    /// A live update reaches a key whose own fetch brings a newer copy first (the fetch answered while a change of
    /// the key ran, the update came after): however the two are ordered, every key ends showing the copy the
    /// entities hold.
    func test_aLiveUpdate_queuedBehindTheKeysOwnFetchOfANewerCopy_leavesEveryKeyAgreeing() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let fetches = KeyedLoaderSpy<Int, [Person]>()
        let lists = makeListStore(people) { fetches[$0].eraseToAnyLoader() }
        for key in 0..<2 {
            let first = expectation(description: "list \(key) read")
            lists.read(key).load { _ in first.fulfill() }
            fetches.complete(key, with: [ada, grace])
            wait(for: [first], timeout: .watchdog)
        }
        let refetched = expectation(description: "list 0 fetched again")
        lists.read(0, policy: .networkOnly).load { _ in refetched.fulfill() }

        // A change of list 0 runs (held until `release`): what comes for the key meanwhile waits behind it. (The
        // change is applied again to what the fetch brings: held the first time only.)
        let (running, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let held = Locked(false)
        let changed = expectation(description: "the change ran")
        DispatchQueue.global().async {
            lists.update(0) { value in
                guard !held.withLock({ exchange(&$0, with: true) }) else { return value }
                running.signal()
                release.wait()
                return value
            }
            changed.fulfill()
        }
        running.wait()
        // List 0's fetch answers with a newer copy of Ada, then the app updates Ada with another one.
        fetches.complete(0, with: [Person(id: "ada", name: "Ada, fetched", version: 3), grace])
        people.update(Person(id: "ada", name: "Ada, updated", version: 2))
        release.signal()
        wait(for: [changed, refetched], timeout: .watchdog)

        let copy = people.entity("ada")
        XCTAssertNotNil(copy)
        XCTAssertEqual(lists.state(for: 0).value?.first, copy, "list 0 shows the copy the entities hold")
        XCTAssertEqual(lists.state(for: 1).value?.first, copy, "list 1 shows the copy the entities hold")
    }

    func test_successiveEdits_eachReachTheKeys_andTheCopyStaysKnown() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = makeListStore(people) { _ in Self.answering([ada, grace]) }
        let shown = show(1, in: lists)
        XCTAssertTrue(eventually { shown.withLock { $0.count } == 1 })

        for version in 2...5 { people.update(Person(id: "ada", name: "Ada", version: version)) }

        XCTAssertEqual(shown.withLock { $0.compactMap { $0?.first?.version } }, [1, 2, 3, 4, 5])
        XCTAssertEqual(people.entity("ada")?.version, 5)
    }

    func test_aKeyFollowsTheEntitiesAddedToIt_andNoLongerThoseRemovedFromIt() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = makeListStore(people) { _ in Self.answering([ada]) }
        let details = makeDetailStore(people) { _ in Self.answering(grace) }
        let list = show(1, in: lists)
        XCTAssertEqual(read("grace", in: details), grace)
        XCTAssertTrue(eventually { list.withLock { $0.last } == [ada] })

        lists.update(1) { $0.map { $0 + [grace] } }  // Grace joins the list
        let renamed = Person(id: "grace", name: "Grace Hopper", version: 2)
        people.update(renamed)
        XCTAssertEqual(list.withLock { $0.last }, [ada, renamed], "an entity added to the key is followed there")

        lists.update(1) { $0.map { Array($0.dropFirst()) } }  // Ada leaves it
        let published = list.withLock { $0.count }
        people.update(Person(id: "ada", name: "Ada, elsewhere", version: 2))
        XCTAssertEqual(list.withLock { $0.count }, published, "an entity removed from the key no longer reaches it")
        XCTAssertNil(people.entity("ada"), "no key holds Ada any more")
        XCTAssertEqual(people.entity("grace"), renamed)
    }

    /// A list may hold one entity twice (a friend pinned on top and in the list): it holds the entity as long as one
    /// of its places does, whichever part of the list changes.
    func test_anEntityTheListHoldsTwice_staysFollowed_untilItsLastPlaceGoes() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let lists = makeListStore(people) { _ in Self.answering([ada, grace, ada]) }
        let list = show(1, in: lists)
        XCTAssertTrue(eventually { list.withLock { $0.last } == [ada, grace, ada] })

        lists.update(1) { $0.map { Array($0.prefix(1)) } }  // Grace and Ada's second place go
        let renamed = Person(id: "ada", name: "Ada Lovelace", version: 2)
        people.update(renamed)
        XCTAssertEqual(list.withLock { $0.last }, [renamed], "the place Ada keeps is followed")
        XCTAssertNil(people.entity("grace"), "no key holds Grace any more")

        lists.update(1) { $0.map { $0 + [grace, renamed] } }  // a second place again, then the first goes
        lists.update(1) { $0.map { Array($0.dropFirst()) } }
        let again = Person(id: "ada", name: "Ada, Countess", version: 3)
        people.update(again)
        XCTAssertEqual(list.withLock { $0.last }, [grace, again], "the second place is followed once the first goes")

        lists.update(1) { $0.map { Array($0.prefix(1)) } }
        XCTAssertNil(people.entity("ada"), "no place holds Ada any more")
    }

    func test_aCopyFetchedInOneKey_reachesTheOthers_andAnEntityEditedInAListReachesTheDetail() {
        let people = SharedEntities<Person>()
        let answers = Locked<[Person]>([ada])
        let lists = makeListStore(people) { _ in Self.answering(answers.withLock { $0 }) }
        let details = makeDetailStore(people) { _ in Self.answering(Person(id: "ada", name: "Ada L.", version: 2)) }
        XCTAssertEqual(read(1, in: lists), [ada])
        let listShown = observe(1, in: lists)

        // A fresh fetch of the detail brings a newer copy: the list shows it.
        XCTAssertEqual(read("ada", in: details)?.name, "Ada L.")
        XCTAssertEqual(listShown.withLock { $0.last }, [Person(id: "ada", name: "Ada L.", version: 2)])

        // A live update of the list's copy reaches the detail.
        let detailShown = observe("ada", in: details)
        lists.update(1) { list in list?.map { Person(id: $0.id, name: "Countess", version: 3) } }
        XCTAssertEqual(detailShown.withLock { $0.last }, Person(id: "ada", name: "Countess", version: 3))
    }

    func test_aCallerHearsOfAValueOnlyOnceTheEntitiesKnowItsKey_soAnEditRightAfterReachesIt() {
        let people = SharedEntities<Person>()
        let (ada, grace) = (ada, grace)
        let renamed = Person(id: "ada", name: "Ada L.", version: 2)
        let lists = makeListStore(people) { _ in Self.answering([ada, grace]) }
        let feeds = PagedStore(
            levels: [.cache(MemoryCache<Int, PagedList<Person, Int>>(), name: "memory")],
            entities: people.held(in: .items())
        ) { (_: Int, _: Int?) in Self.answering(Page(items: [ada], nextCursor: nil)) }

        // Each caller edits Ada the moment it hears of its value (a live update arriving then).
        let read = expectation(description: "the list read")
        lists.read(1).load { _ in
            people.update(renamed)
            read.fulfill()
        }
        wait(for: [read], timeout: .watchdog)
        XCTAssertEqual(lists.state(for: 1).value, [renamed, grace], "the list read")

        let appended = expectation(description: "the page appended")
        feeds.nextPage(of: 7).load { _ in
            people.update(Person(id: "ada", name: "Countess", version: 3))
            appended.fulfill()
        }
        wait(for: [appended], timeout: .watchdog)
        XCTAssertEqual(feeds.store.state(for: 7).value?.items.map(\.name), ["Countess"], "the page appended")
        XCTAssertEqual(lists.state(for: 1).value?.first?.name, "Countess")
    }

    func test_aRefusedChange_isUndoneEverywhere_whileALaterAcceptedOneStays() {
        let (people, lists, details) = makeListsAndDetail(lists: 3)
        let shown = (0..<3).map { observe($0, in: lists) }
        let detailShown = observe("ada", in: details)

        let refusedCommit = LoaderSpy<Void>()
        let acceptedCommit = LoaderSpy<Void>()
        let refused = Locked<Result<Void, any Error>?>(nil)
        let accepted = Locked<Result<Void, any Error>?>(nil)
        let rename: @Sendable (Person) -> Person = { person in
            Person(id: person.id, name: person.name + " (renamed)", version: person.version)
        }
        let bump: @Sendable (Person) -> Person = { Person(id: $0.id, name: $0.name, version: $0.version + 10) }
        people.mutate("ada", rename, commit: refusedCommit, completion: { result in refused.withLock { $0 = result } })
        people.mutate("ada", bump, commit: acceptedCommit, completion: { result in accepted.withLock { $0 = result } })
        let both = Person(id: "ada", name: "Ada (renamed)", version: 11)
        for list in shown { XCTAssertEqual(list.withLock { $0.last }, [both, grace], "shown at once everywhere") }
        XCTAssertEqual(detailShown.withLock { $0.last }, both)
        XCTAssertEqual(refusedCommit.loadCount, 1, "one commit for every key holding the entity")

        refusedCommit.fail(with: URLError(.badServerResponse))
        acceptedCommit.complete(with: ())
        XCTAssertTrue(eventually { refused.withLock { $0 } != nil && accepted.withLock { $0 } != nil })
        XCTAssertThrowsError(try refused.withLock { $0 }?.get())
        XCTAssertNoThrow(try accepted.withLock { $0 }?.get())

        let kept = Person(id: "ada", name: "Ada", version: 11)
        for list in shown { XCTAssertEqual(list.withLock { $0.last }, [kept, grace], "undone, the other stays") }
        XCTAssertEqual(detailShown.withLock { $0.last }, kept)
        XCTAssertEqual(people.entity("ada"), kept)
    }

    /// One road for an optimistic edit: a store's `mutate` of a key (a detail screen's rename) shows the changed copy
    /// in every key holding the entity at once, with one commit; confirmed everywhere when accepted.
    func test_aStoresChangeOfAnEntity_showsInEveryKeyHoldingIt_atOnce_withOneCommit() {
        let (people, lists, details) = makeListsAndDetail(lists: 2)
        let shown = (0..<2).map { observe($0, in: lists) }
        let commit = LoaderSpy<Void>()
        let outcome = Locked<Result<Void, any Error>?>(nil)

        let renamed = Person(id: "ada", name: "Ada L.")
        let rename: @Sendable (Person?) -> Person? = { $0.map { Person(id: $0.id, name: "Ada L.") } }
        details.mutate("ada", rename, commit: commit, completion: { result in outcome.withLock { $0 = result } })
        for list in shown { XCTAssertEqual(list.withLock { $0.last }, [renamed, grace], "shown at once in each list") }
        XCTAssertEqual(details.state(for: "ada").value, renamed)
        XCTAssertEqual(commit.loadCount, 1, "one commit")

        commit.complete(with: ())
        XCTAssertTrue(eventually { outcome.withLock { $0 } != nil })
        XCTAssertNoThrow(try outcome.withLock { $0 }?.get())
        for key in 0..<2 { XCTAssertEqual(lists.state(for: key).value, [renamed, grace]) }
        for key in 0..<2 { XCTAssertFalse(lists.state(for: key).hasPendingChanges, "confirmed") }
        XCTAssertEqual(people.entity("ada"), renamed)

        // From a list too: the detail shows it, and a refusal undoes it in both.
        let refused = LoaderSpy<Void>()
        let refusal = Locked<Result<Void, any Error>?>(nil)
        let countess: @Sendable ([Person]?) -> [Person]? = { list in
            list?.map { $0.id == "ada" ? Person(id: "ada", name: "Countess") : $0 }
        }
        lists.mutate(0, countess, commit: refused, completion: { result in refusal.withLock { $0 = result } })
        XCTAssertEqual(details.state(for: "ada").value?.name, "Countess")
        XCTAssertEqual(lists.state(for: 1).value?.first?.name, "Countess")
        refused.fail(with: URLError(.badServerResponse))
        XCTAssertTrue(eventually { refusal.withLock { $0 } != nil })
        XCTAssertThrowsError(try refusal.withLock { $0 }?.get())
        XCTAssertEqual(details.state(for: "ada").value, renamed, "undone in the detail")
        for key in 0..<2 { XCTAssertEqual(lists.state(for: key).value, [renamed, grace], "and in each list") }
    }

    /// A store's `write` and `update` of a key reach every key holding the entities they change, before they return.
    func test_aStoresWriteAndUpdateOfAnEntity_reachEveryKeyHoldingIt_atOnce() {
        let (_, lists, details) = makeListsAndDetail(lists: 2)

        details.write(Person(id: "ada", name: "Ada L."), for: "ada")
        for key in 0..<2 { XCTAssertEqual(lists.state(for: key).value?.first?.name, "Ada L.", "in list \(key)") }

        lists.update(0) { $0?.map { $0.id == "ada" ? Person(id: "ada", name: "Countess") : $0 } }
        XCTAssertEqual(details.state(for: "ada").value?.name, "Countess", "updated: in the detail")
        XCTAssertEqual(lists.state(for: 1).value?.first?.name, "Countess", "and in the other list")
    }

    /// Cancelling a store's change of an entity cancels its one commit and undoes it in every key; a change that
    /// only drops an entity from a key's value (a filter) is that key's alone.
    func test_aStoresChangeOfAnEntity_cancelled_isUndoneEverywhere_andDroppingAnEntityStaysInItsKey() {
        let (_, lists, details) = makeListsAndDetail(lists: 2)
        let commit = LoaderSpy<Void>()

        let token = details.mutate("ada", { $0.map { Person(id: $0.id, name: "Ada L.") } }, commit: commit)
        XCTAssertEqual(lists.state(for: 1).value?.first?.name, "Ada L.")
        token.cancel()
        XCTAssertEqual(commit.cancelledRequests, [0], "the one commit is cancelled")
        XCTAssertEqual(lists.state(for: 1).value, [ada, grace], "undone in the list")
        XCTAssertEqual(details.state(for: "ada").value, ada, "and in the detail")

        let deletion = LoaderSpy<Void>()
        lists.mutate(1, { $0?.filter { $0.id != "ada" } }, commit: deletion)
        XCTAssertEqual(lists.state(for: 1).value, [grace])
        XCTAssertEqual(details.state(for: "ada").value, ada, "the detail keeps its entity")
        deletion.complete(with: ())
    }

    func test_aLogoutWhileAChangeIsSent_cancelsItsCommit_andShowsNothingOfIt() {
        let (people, lists, details) = makeListsAndDetail(lists: 2)
        let listShown = observe(1, in: lists)
        let commit = LoaderSpy<Void>()
        let outcome = Locked<Result<Void, any Error>?>(nil)
        let rename: @Sendable (Person) -> Person = { Person(id: $0.id, name: "Renamed", version: 2) }
        people.mutate("ada", rename, commit: commit, completion: { result in outcome.withLock { $0 = result } })
        XCTAssertEqual(listShown.withLock { $0.last }, [Person(id: "ada", name: "Renamed", version: 2), grace])

        for clear in [lists.clear, details.clear] {
            let cleared = expectation(description: "cleared")
            clear { cleared.fulfill() }
            wait(for: [cleared], timeout: .watchdog)
        }

        XCTAssertTrue(eventually { outcome.withLock { $0 } != nil })
        XCTAssertThrowsError(try outcome.withLock { $0 }?.get()) { XCTAssertEqual($0 as? StoreError, .cleared) }
        XCTAssertEqual(commit.cancelledRequests, [0], "no key waits for the commit any more")
        XCTAssertEqual(listShown.withLock { $0.last }, .some(nil))
        XCTAssertNil(people.entity("ada"))
        commit.complete(with: ())  // a late answer changes nothing
        XCTAssertEqual(listShown.withLock { $0.last }, .some(nil))
    }

    /// Two lists fetched at once, the first answering with `first`, then the second with `second`; what each shows.
    private func racingFetches(
        over people: SharedEntities<Person>, answering first: [Person], then second: [Person]
    ) -> (Locked<[[Person]?]>, Locked<[[Person]?]>) {
        let fetches = [LoaderSpy<[Person]>(), LoaderSpy<[Person]>()]
        let lists = makeListStore(people) { fetches[$0 - 1].eraseToAnyLoader() }
        let shown = (observe(1, in: lists), observe(2, in: lists))
        lists.read(1).load { _ in }
        lists.read(2).load { _ in }
        fetches[0].complete(with: first)
        fetches[1].complete(with: second)
        return shown
    }

    func test_twoFetchesRacing_bringTheNewerCopyEverywhere_whenTheEntitiesSayWhichIsNewer() {
        let people = SharedEntities<Person>(isNewer: { $0.version > $1.version })
        let newer = Person(id: "ada", name: "Ada, newer", version: 5)
        let older = Person(id: "ada", name: "Ada, older", version: 4)
        let (one, two) = racingFetches(over: people, answering: [newer], then: [older])  // the older copy answers last

        XCTAssertTrue(eventually { one.withLock { $0.last } == [newer] && two.withLock { $0.last } == [newer] })
        XCTAssertEqual(people.entity("ada"), newer)
    }

    func test_withoutAVersion_theCopyLearnedLastWins_everywhere() {
        let people = SharedEntities<Person>()
        let early = Person(id: "ada", name: "Ada, answered first")
        let late = Person(id: "ada", name: "Ada, answered last")
        let (one, two) = racingFetches(over: people, answering: [early], then: [late])

        XCTAssertTrue(eventually { one.withLock { $0.last } == [late] && two.withLock { $0.last } == [late] })
    }

    func test_withoutAVersion_aListAnsweringAfterTheDetail_winsEverywhere_thoughItsFetchRanWhenTheDetailAnswered() {
        let people = SharedEntities<Person>()
        let first = Person(id: "ada", name: "Ada, answered first")
        let last = Person(id: "ada", name: "Ada, answered last")
        let detailFetch = LoaderSpy<Person>()
        let listFetch = LoaderSpy<[Person]>()
        let details = makeDetailStore(people) { _ in detailFetch.eraseToAnyLoader() }
        let lists = makeListStore(people) { _ in listFetch.eraseToAnyLoader() }
        let detailShown = observe("ada", in: details)
        let listShown = observe(1, in: lists)
        details.write(ada, for: "ada")
        lists.write([ada, grace], for: 1)
        details.freshValue(of: "ada").load { _ in }  // asked first
        lists.freshValue(of: 1).load { _ in }  // asked last

        detailFetch.complete(with: first)  // answered first: reaches the list while its fetch runs
        listFetch.complete(with: [last, grace])  // answered last

        XCTAssertTrue(
            eventually { listShown.withLock { $0.last } == [last, grace] && detailShown.withLock { $0.last } == last },
            "the copy learned last wins: list \(listShown.withLock { $0 }), detail \(detailShown.withLock { $0 })")
        XCTAssertEqual(people.entity("ada"), last)
    }

    func test_aLiveUpdateMadeWhileAListIsFetched_isAppliedAgainToWhatTheFetchBrings() {
        let people = SharedEntities<Person>()
        let listFetch = LoaderSpy<[Person]>()
        let lists = makeListStore(people) { _ in listFetch.eraseToAnyLoader() }
        let listShown = observe(1, in: lists)
        lists.write([ada], for: 1)
        lists.freshValue(of: 1).load { _ in }
        let live = Person(id: "ada", name: "Ada, live")

        people.update(live)  // while the refresh runs
        listFetch.complete(with: [ada, grace])

        XCTAssertTrue(
            eventually { listShown.withLock { $0.last } == [live, grace] }, "\(listShown.withLock { $0 })")
    }

    func test_aCopyReadBackFromALevel_isReplacedByTheNewerOneKnown() {
        let people = SharedEntities<Person>()
        let disk = MemoryCache<Int, [Person]>()
        let stale = Person(id: "ada", name: "Ada, as saved last week")
        disk.save([stale], for: 7) { _ in }
        let fresh = Person(id: "ada", name: "Ada, fetched now")
        let lists = makeListStore(people, level: disk) { _ in Self.answering([fresh]) }
        XCTAssertEqual(read(1, in: lists), [fresh])

        let shown = observe(7, in: lists)
        _ = read(7, in: lists)  // a hit: the level's old copy
        XCTAssertTrue(eventually { shown.withLock { $0.last } == [fresh] }, "\(shown.withLock { $0 })")
        XCTAssertEqual(people.entity("ada"), fresh, "the old copy did not win")
    }

    func test_aClear_forgetsTheStoresEntities_andTheKeysFollowedAreBounded() {
        let people = SharedEntities<Person>(keptKeys: 100)
        let lists = makeListStore(people) { number in
            Self.answering([Person(id: "p\(number)", name: "Person \(number)")])
        }
        for key in 0..<1_000 { XCTAssertNotNil(read(key, in: lists)) }
        XCTAssertEqual(people.keyCount, 100, "the least recently confirmed keys are let go of")
        XCTAssertNil(people.entity("p0"), "with the entities no other key holds")
        XCTAssertNotNil(people.entity("p999"))

        let cleared = expectation(description: "cleared")
        lists.clear { cleared.fulfill() }
        wait(for: [cleared], timeout: .watchdog)
        XCTAssertEqual(people.keyCount, 0)
        XCTAssertNil(people.entity("p999"), "nothing of the user before the logout is kept")
    }
}

extension XCTestCase {
    /// `key`'s value as a read of `store` gives it (the entity tests' look at what a key shows).
    func read<Key: Hashable & Sendable, Value: Sendable>(_ key: Key, in store: Store<Key, Value>) -> Value? {
        let done = expectation(description: "read")
        let value = Locked<Value?>(nil)
        store.read(key).load { result in
            value.withLock { $0 = try? result.get().value }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        return value.withLock { $0 }
    }
}
