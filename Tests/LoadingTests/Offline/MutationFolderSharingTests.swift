import Dispatch
import Foundation
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

/// Two processes over one mutation folder (an app and its extension): neither deletes the other's half-written
/// files, and two queues over the folder send each mutation once. The other process is this test binary, started on
/// ``MutationFolderSharingChild``.
final class MutationFolderSharingTests: XCTestCase {
    func test_loadingTheFolderInOneProcess_neverBreaksTheSavesOfAnother() throws {
        let directory = makeDirectory()
        let child = try startSharingChild(role: "save", directory: directory, count: 1_000)
        let storage = FileMutationStorage<String>(directory: directory)
        while child.isRunning { _ = try? storage.loadAll() }
        let report = child.report()

        XCTAssertEqual(report["failed"], ["0"], "every save of the other process succeeded: \(report)")
        XCTAssertEqual(report["saved"], ["1000"])
        XCTAssertEqual(try storage.loadAll().count, 1_000, "and every one of them is kept")
    }

    func test_twoQueuesOverOneFolder_sendEachMutationOnce() throws {
        let directory = makeDirectory()
        let storage = FileMutationStorage<String>(directory: directory)
        let count = 60
        for index in 0..<count {
            try storage.save(
                StoredMutation(id: "m\(index)", sequence: index, input: "i\(index)", createdAt: Date(), attempts: 0))
        }
        let child = try startSharingChild(role: "replay", directory: directory, count: count)
        let sent = Locked<[String]>([])
        let queue = try MutationFolderSharingChild.makeQueue(directory: directory) { id in
            sent.withLock { $0.append(id) }
        }
        XCTAssertTrue(eventually { !queue.isMutating }, "this process is done")
        let report = child.report()

        let all = sent.withLock { $0 } + (report["sent"] ?? [])
        XCTAssertEqual(all.count, count, "each mutation sent once in all: \(all.sorted())")
        XCTAssertEqual(Set(all), Set((0..<count).map { "m\($0)" }))
        XCTAssertEqual(try storage.loadAll().count, 0)
    }

    private func makeDirectory() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shared-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }
}

extension XCTestCase {
    /// Starts ``MutationFolderSharingChild`` as a child process in `role`, over `directory`.
    fileprivate func startSharingChild(role: String, directory: URL, count: Int) throws -> ChildTest {
        try startChild(
            "MutationFolderSharingChild/test_runsWhenStartedBySharingTests",
            environment: [MutationFolderSharingChild.variable: "\(role) \(count) \(directory.path)"])
    }
}

extension ChildTest {
    /// Waits for the child to end, and returns its report: the lines it printed as `REPORT word value`, grouped by
    /// word.
    fileprivate func report() -> [String: [String]] {
        var report: [String: [String]] = [:]
        for line in waitForEnd().split(separator: "\n") where line.hasPrefix("REPORT ") {
            let parts = line.dropFirst("REPORT ".count).split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { report[parts[0], default: []].append(parts[1]) }
        }
        return report
    }
}

/// The child side of ``MutationFolderSharingTests``: skipped unless run by it.
final class MutationFolderSharingChild: XCTestCase {
    static let variable = "LOADING_SHARED_FOLDER"

    /// A queue over `directory` whose server accepts each mutation a moment later, on another thread.
    static func makeQueue(
        directory: URL, sent: @escaping @Sendable (String) -> Void
    ) throws -> MutationQueue<String, [String], String> {
        let store = Store<String, [String]>(levels: [], fetch: LoaderFamily { _ in LoaderSpy<[String]>() })
        store.write([], for: "list")
        return try MutationQueue(
            store: store, storage: FileMutationStorage<String>(directory: directory),
            retryDelays: .constant(.milliseconds(10)), key: { _ in "list" },
            change: { item, list in (list ?? []) + [item] },
            send: { _, id in
                AnyLoader<Void> { completion in
                    sent(id)
                    DispatchQueue.global().async { completion(.success(())) }
                    return AnyCancellationToken {}
                }
            }, isRefused: { _ in false })
    }

    func test_runsWhenStartedBySharingTests() throws {
        guard let setting = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of MutationFolderSharingTests: it runs only when that test starts it")
        }
        let parts = setting.split(separator: " ", maxSplits: 2).map(String.init)
        let (role, count, directory) = (parts[0], Int(parts[1]) ?? 0, URL(fileURLWithPath: parts[2]))
        @Sendable func say(_ line: String) { FileHandle.standardOutput.write(Data("REPORT \(line)\n".utf8)) }
        switch role {
        case "save":
            let storage = FileMutationStorage<String>(directory: directory)
            var failed = 0
            for index in 0..<count {
                let mutation = StoredMutation(
                    id: "c\(index)", sequence: index, input: "x", createdAt: Date(), attempts: 0)
                do { try storage.save(mutation) } catch { failed += 1 }
            }
            say("saved \(count - failed)")
            say("failed \(failed)")
        default:
            let queue = try Self.makeQueue(directory: directory) { id in say("sent \(id)") }
            XCTAssertTrue(eventually { !queue.isMutating })
        }
    }
}
