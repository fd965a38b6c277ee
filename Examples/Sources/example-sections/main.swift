// Sections: independent titled sources combined into one sectioned screen; a slow section does not
// block the others and a failing one fails alone. Run: swift run --package-path Examples example-sections
import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingScreens

let now = Date()
let all = [
    Friend(id: "1", name: "Ada", status: .online, updatedAt: now),
    Friend(id: "2", name: "Grace", status: .offline, updatedAt: now - 3_600),
    Friend(id: "3", name: "Alan", status: .online, updatedAt: now - 60),
]
let friends = AnyLoader { all }
let slowRecommendations = AnyLoader<[Friend]> {
    try await Task.sleep(for: .milliseconds(300))
    return [Friend(id: "9", name: "Barbara", status: .away, updatedAt: now)]
}
struct Offline: Error {}
let favourites = AnyLoader<[Friend]> { throw Offline() }

let sections = SectionedSource([
    TitledSource(title: "Online", loader: friends.map { $0.filter { $0.status == .online } }),
    TitledSource(title: "All friends", loader: friends),
    TitledSource(title: "Recommended", loader: slowRecommendations),
    TitledSource(title: "Favourites", loader: favourites),
])

func describe(_ state: LoadingState<[Friend]>) -> String {
    switch state {
    case .idle: "idle"
    case .loading: "loading..."
    case .loaded(let friends): friends.map(\.name).joined(separator: ", ")
    case .failed(let error, _): "failed (\(error))"
    }
}

let done = DispatchSemaphore(value: 0)
let subscription = sections.sections.sink { _ in
    done.signal()
} receiveValue: { sections in
    print("--")
    for section in sections {
        print("\(section.title.padding(toLength: 12, withPad: " ", startingAt: 0)) \(describe(section.state))")
    }
}
done.wait()
