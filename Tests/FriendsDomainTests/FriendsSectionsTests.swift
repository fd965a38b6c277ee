import Foundation
import FriendsDomain
import Loading
import LoadingScreens
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

final class FriendsSectionsTests: XCTestCase {
    func test_onlineAllAndRecentlyUpdated_eachFromItsSource() {
        let memory = InMemoryFriendsStore()
        let database = InMemoryFriendsStore()
        let ada = makeFriend("1", status: .online, updatedAt: 100)
        let bob = makeFriend("2", status: .offline, updatedAt: 300)
        let cy = makeFriend("3", status: .online, updatedAt: 200)
        memory.replaceAll(with: [ada, bob, cy], timestamp: fixedDate) { _ in }
        database.replaceAll(with: [ada, bob, cy], timestamp: fixedDate) { _ in }
        let composer = FriendsComposer(
            memoryStore: memory, databaseStore: database, remote: AnyLoader { throw AnyError() })

        // README: sections begin
        let sections = composer.sections(recentlyUpdatedLimit: 2)
        let subscription = sections.sections.sink { sections in
            for section in sections { print(section.title, section.state.value?.count ?? 0) }
        }
        // README: sections end
        subscription.cancel()

        let recorder = StreamRecorder(composer.sections(recentlyUpdatedLimit: 2).sections)
        let done = expectation(description: "all sections loaded")
        let poll = Timer.scheduledTimer(withTimeInterval: 0.005, repeats: true) { _ in
            if recorder.completion != nil { done.fulfill() }
        }
        wait(for: [done], timeout: .watchdog)
        poll.invalidate()

        let last = recorder.values.last ?? []
        XCTAssertEqual(last.map(\.title), ["Online", "All friends", "Recently updated"])
        XCTAssertEqual(last.map(\.state), [.loaded([ada, cy]), .loaded([ada, bob, cy]), .loaded([bob, cy])])
    }

    func test_aFailingSourceFailsOnlyItsSection() {
        let memory = InMemoryFriendsStore()
        memory.replaceAll(with: [makeFriend("1")], timestamp: fixedDate) { _ in }
        let composer = FriendsComposer(
            memoryStore: memory, databaseStore: FailingStore(), remote: AnyLoader { throw FriendsAPIError.invalidData })
        let recorder = StreamRecorder(composer.sections().sections)
        let done = expectation(description: "done")
        let poll = Timer.scheduledTimer(withTimeInterval: 0.005, repeats: true) { _ in
            if recorder.completion != nil { done.fulfill() }
        }
        wait(for: [done], timeout: .watchdog)
        poll.invalidate()

        let states = recorder.values.last?.map(\.state) ?? []
        XCTAssertEqual(states[0], .loaded([makeFriend("1")]))
        XCTAssertEqual(states[1], .loaded([makeFriend("1")]))
        XCTAssertTrue(states[2].error is AnyError, "the database's failure stays in its section")
    }
}
