import Foundation
import Loading

/// A post of a feed, for paged lists.
struct Post: Identifiable, Equatable, Codable, Sendable {
    let id: Int
    var text: String
}

/// A paged source over a list of posts it holds, paged by offset: a page of `pageSize` posts from the cursor's
/// offset. It records every cursor asked for; while `holds` is set, pages wait for `release()`. Given an `anchor`, it
/// opens the list there (the first page, asked with no cursor, starts at it) and its pages give previous cursors.
final class PageSource: Sendable {
    private struct State {
        var posts: [Post]
        var requests: [Int?] = []
        var holds = false
        var held: [@Sendable () -> Void] = []
        var failing: Set<Int> = []
    }

    let pageSize: Int
    let anchor: Int?
    private let state: Locked<State>

    init(posts: [Post], pageSize: Int = 2, anchor: Int? = nil) {
        self.pageSize = pageSize
        self.anchor = anchor
        state = Locked(State(posts: posts))
    }

    convenience init(count: Int, pageSize: Int = 2, anchor: Int? = nil) {
        self.init(posts: (0..<count).map { Post(id: $0, text: "post \($0)") }, pageSize: pageSize, anchor: anchor)
    }

    var requests: [Int?] { state.withLock { $0.requests } }
    var posts: [Post] {
        get { state.withLock { $0.posts } }
        set { state.withLock { $0.posts = newValue } }
    }
    var holds: Bool {
        get { state.withLock { $0.holds } }
        set { state.withLock { $0.holds = newValue } }
    }

    /// Makes the page at `offset` fail.
    func fail(at offset: Int) {
        state.withLock { _ = $0.failing.insert(offset) }
    }

    /// Makes the page at `offset` answer again.
    func recover(at offset: Int) {
        state.withLock { _ = $0.failing.remove(offset) }
    }

    /// Answers the pages held, in order.
    func release() {
        let held = state.withLock { state in
            state.holds = false
            defer { state.held = [] }
            return state.held
        }
        for answer in held { answer() }
    }

    func page(at cursor: Int?) -> AnyLoader<Page<Post, Int>> {
        AnyLoader { [self] completion in
            let offset = cursor ?? anchor ?? 0
            let previous = anchor != nil && offset > 0 ? max(0, offset - pageSize) : nil
            let (answer, isHeld) = state.withLock { state -> (@Sendable () -> Void, Bool) in
                state.requests.append(cursor)
                let fails = state.failing.contains(offset)
                let items = Array(state.posts.dropFirst(offset).prefix(pageSize))
                let next = offset + items.count < state.posts.count ? offset + items.count : nil
                let answer: @Sendable () -> Void = {
                    completion(
                        fails
                            ? .failure(URLError(.notConnectedToInternet))
                            : .success(Page(items: items, nextCursor: next, previousCursor: previous)))
                }
                if state.holds { state.held.append(answer) }
                return (answer, state.holds)
            }
            if !isHeld { answer() }
            return AnyCancellationToken {}
        }
    }
}
