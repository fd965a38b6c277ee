import Dispatch
import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import XCTest

func makeFriend(_ id: String, name: String? = nil, status: Friend.Status = .online, updatedAt: Double = 1_700_000_000)
    -> Friend
{
    Friend(
        id: id,
        name: name ?? "Friend \(id)",
        status: status,
        avatarURL: URL(string: "https://example.com/\(id).png"),
        updatedAt: Date(timeIntervalSince1970: updatedAt))
}

let fixedDate = Date(timeIntervalSince1970: 1_763_000_000)

struct AnyError: Error, Equatable {}

/// Waits for a completion-based call, failing the test if it does not complete in time.
func awaitResult<T: Sendable>(
    timeout: Double = .watchdog,
    file: StaticString = #filePath,
    line: UInt = #line,
    _ start: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
) -> Result<T, any Error>? {
    let done = DispatchSemaphore(value: 0)
    let box = Locked<Result<T, any Error>?>(nil)
    start { result in
        box.withLock { $0 = result }
        done.signal()
    }
    guard done.wait(timeout: .now() + timeout) == .success else {
        XCTFail("the call did not complete within \(Int(timeout)) s (a watchdog)", file: file, line: line)
        return nil
    }
    return box.withLock { $0 }
}

func temporaryFileURL(_ name: String = "friends") -> URL {
    FileManager.default.temporaryDirectory
        .appendingPathComponent("loading-tests-\(UUID().uuidString)")
        .appendingPathComponent("\(name).sqlite")
}

/// Runs the main queue for a moment before a test cancels a live stream it just opened: FoundationNetworking on Linux
/// crashes on a task cancelled as it starts ("a task that is not in the registry", seen 5 times in 5 runs of a
/// thousand), and nothing tells when a stream's request, made inside a sample, has started. A platform's workaround:
/// what the test asserts does not depend on it.
func waitUntilRequestsStarted() {
    RunLoop.current.run(until: Date().addingTimeInterval(0.3))  // a wait for FoundationNetworking, see above
}
