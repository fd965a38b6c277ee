import Foundation
import XCTest

@testable import FriendsDomain

/// The rewrite of a shown list with the ids the server gave: it shows what the additions rewritten show.
final class NewFriendChangeTests: XCTestCase {
    private let date = Date(timeIntervalSince1970: 0)

    func test_aListRewritten_showsWhatTheRewrittenChangesShow() {
        let server: (String) -> String? = { $0 == "local-1" ? "u9" : nil }
        let confirmed = [friend("u1", "Ann")]
        let changes: [NewFriendChange] = [.add(friend("local-1", "Grace")), .add(friend("local-2", "Bob"))]
        let shown = changes.reduce(confirmed as [Friend]?) { $1.applied(to: $0) }!

        let rewritten = changes.map { $0.replacingIDs(server) ?? $0 }.reduce(confirmed as [Friend]?) {
            $1.applied(to: $0)
        }

        XCTAssertEqual(NewFriendChange.replacingIDs(in: shown, server), rewritten)
    }

    func test_aListHoldingTheServersCopyAlready_showsTheFriendOnce_whereTheAdditionPlacesIt() {
        // A fetch brought the server's copy before the creation was confirmed.
        let server: (String) -> String? = { $0 == "local-1" ? "u9" : nil }
        let confirmed = [friend("u9", "Grace"), friend("u1", "Ann")]
        let addition = NewFriendChange.add(friend("local-1", "Grace"))
        let shown = addition.applied(to: confirmed)!

        let rewritten = (addition.replacingIDs(server) ?? addition).applied(to: confirmed)

        XCTAssertEqual(NewFriendChange.replacingIDs(in: shown, server), rewritten)
        XCTAssertEqual(rewritten?.map(\.id), ["u1", "u9"])
    }

    private func friend(_ id: String, _ name: String) -> Friend {
        Friend(id: id, name: name, status: .online, updatedAt: date)
    }
}
