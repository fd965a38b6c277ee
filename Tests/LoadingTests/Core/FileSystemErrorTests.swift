import Foundation
import Loading
import LoadingTestHelpers
import XCTest

/// Every public error with a file-system cause reads as a sentence in the system's own words ("Not a directory"),
/// never as a dump of the Foundation error that carried them.
final class FileSystemErrorTests: XCTestCase {
    private var regularFile: URL!

    override func setUpWithError() throws {
        let folder = try makeTemporaryFolder("file-system-errors")
        regularFile = folder.appendingPathComponent("a-file")
        XCTAssertTrue(FileManager.default.createFile(atPath: regularFile.path, contents: Data("x".utf8)))
    }

    func test_aDiskCacheSaveUnderARegularFile_saysNotADirectory() throws {
        let disk = DiskCache<String, String>(directory: regularFile.appendingPathComponent("cache"))
        let failure = Locked<(any Error)?>(nil)
        let saved = expectation(description: "saved")
        disk.save("value", for: "k") { result in
            if case .failure(let error) = result { failure.withLock { $0 = error } }
            saved.fulfill()
        }
        wait(for: [saved], timeout: .watchdog)

        let error = try XCTUnwrap(failure.withLock { $0 } as? DiskCacheError<String>)
        let text = error.localizedDescription
        XCTAssertTrue(text.hasPrefix("The disk cache could not save the value for k to "), text)
        XCTAssertTrue(text.hasSuffix(": Not a directory."), text)
        XCTAssertEqual(error.description, text)
        assertNoDump(text)
    }

    func test_aMutationStorageSaveUnderARegularFile_saysNotADirectory() throws {
        let storage = FileMutationStorage<String>(directory: regularFile.appendingPathComponent("queue"))
        let mutation = StoredMutation(id: "m1", sequence: 0, input: "rename", createdAt: Date(), attempts: 0)

        XCTAssertThrowsError(try storage.save(mutation)) { error in
            guard let error = error as? MutationStorageError else { return XCTFail("\(error)") }
            let text = error.localizedDescription
            XCTAssertTrue(text.hasPrefix("The pending change m1 could not be saved to "), text)
            XCTAssertTrue(text.hasSuffix(": Not a directory."), text)
            XCTAssertEqual(error.description, text)
            self.assertNoDump(text)
        }
    }

    func test_aChangeJournalUnderARegularFile_saysNotADirectory() {
        let journal = regularFile.appendingPathComponent("changes.journal")

        XCTAssertThrowsError(try ProcessSharing<String>.journal(at: journal, sharedLevel: "shared")) { error in
            guard let error = error as? ProcessSharingError else { return XCTFail("\(error)") }
            XCTAssertEqual(
                error.localizedDescription,
                "The change journal \(journal.path) could not be opened, so the store cannot share its changes with "
                    + "other processes: Not a directory.")
            self.assertNoDump(error.localizedDescription)
        }
    }

    private func assertNoDump(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        for dump in ["Error Domain=", "UserInfo=", "(null)"] {
            XCTAssertFalse(text.contains(dump), "reads as a sentence, not a dump: \(text)", file: file, line: line)
        }
    }
}
