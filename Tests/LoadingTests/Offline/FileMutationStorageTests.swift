import Foundation
import Loading
import XCTest

final class FileMutationStorageTests: XCTestCase {
    func test_savesReplacesAndRemoves_andLoadsInQueueOrder() throws {
        let storage = FileMutationStorage<String>(directory: makeDirectory())
        XCTAssertEqual(try storage.loadAll(), [], "a missing directory holds nothing")
        for sequence in [10, 2, 100] {
            try storage.save(mutation(sequence))
        }
        var attempted = mutation(2)
        attempted.attempts = 3
        try storage.save(attempted)

        XCTAssertEqual(try storage.loadAll().map(\.sequence), [2, 10, 100])
        XCTAssertEqual(try storage.loadAll().first?.attempts, 3)
        try storage.remove(mutation(10))
        try storage.remove(mutation(10))
        XCTAssertEqual(try storage.loadAll().map(\.sequence), [2, 100])
    }

    func test_anUnreadableFileIsMovedAside_andTheOthersLoad_andAWriteThatNeverFinishedIsRemoved() throws {
        let directory = makeDirectory()
        let storage = FileMutationStorage<String>(directory: directory)
        try storage.save(mutation(1))
        try storage.save(mutation(2))
        let files = try listing(directory)
        try Data("{ truncated".utf8).write(to: directory.appendingPathComponent(files[0]))
        try Data("half".utf8).write(to: directory.appendingPathComponent(files[1] + ".1234.writing"))

        XCTAssertEqual(try storage.loadAll().map(\.sequence), [2])

        let left = try listing(directory)
        XCTAssertEqual(left, [files[0] + ".unreadable", files[1]], "kept aside, not deleted")
    }

    func test_aSaveThatFails_isAMutationStorageError_andLeavesThePreviousFile() throws {
        let storage = FileMutationStorage<Payload>(directory: makeDirectory())
        let kept = StoredMutation(id: "m1", sequence: 1, input: Payload(encodes: true), createdAt: Date(), attempts: 0)
        try storage.save(kept)

        let failing = StoredMutation(
            id: "m1", sequence: 1, input: Payload(encodes: false), createdAt: Date(), attempts: 4)
        XCTAssertThrowsError(try storage.save(failing)) { error in
            XCTAssertEqual((error as? MutationStorageError)?.operation, .save)
            XCTAssertEqual((error as? MutationStorageError)?.id, "m1")
        }
        XCTAssertEqual(try storage.loadAll().map(\.attempts), [0], "the previous file is whole")
    }

    /// The directory's files, but for the storage's lock files (`.lock`, `.sending.lock`).
    private func listing(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }.sorted()
    }

    private func mutation(_ sequence: Int) -> StoredMutation<String> {
        StoredMutation(
            id: "m\(sequence)", sequence: sequence, input: "input \(sequence)",
            createdAt: Date(timeIntervalSince1970: 1_000), attempts: 0)
    }

    private func makeDirectory() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("storage-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }
}

/// An input that cannot be encoded when told so.
private struct Payload: Codable, Sendable {
    let encodes: Bool

    func encode(to encoder: any Encoder) throws {
        guard encodes else { throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "no")) }
        var container = encoder.singleValueContainer()
        try container.encode(encodes)
    }

    init(encodes: Bool) {
        self.encodes = encodes
    }

    init(from decoder: any Decoder) throws {
        encodes = try decoder.singleValueContainer().decode(Bool.self)
    }
}
