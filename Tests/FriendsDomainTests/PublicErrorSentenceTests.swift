import Foundation
import XCTest

// Testable: a few errors are made only by the library (a disk cache's failed write, a database file replaced).
@testable import FriendsDomain
@testable import Loading

/// Every public error type of the package, found in its sources, reads as a sentence through the property the
/// articles show (`localizedDescription`): a test that fails when an error type is added without a message.
final class EveryPublicErrorReadsAsASentenceTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// One value of each public error type (several for types whose message depends on the value).
    private var samples: [any Error] {
        let file = URL(fileURLWithPath: "/tmp/outbox/00000000000000000001-m1.mutation")
        return [
            TimeoutError(interval: .seconds(2)),
            LevelTimeoutError(level: "database", operation: .removalOfEveryValue, interval: .milliseconds(200)),
            StreamFinishedWithoutValueError(),
            CacheMiss.absent, CacheMiss.expired(savedAt: Date(timeIntervalSince1970: 0)),
            StoreError.discarded, StoreError.cleared,
            OfflineError(), FriendsComposer.AdditionUnavailable(), FriendsComposer.RenameUnavailable(),
            FriendRenameConflict(current: Friend(id: "u1", name: "Ada", status: "online", updatedAt: Date())),
            MutationQueueError.sentByAnotherProcess, MutationQueueError.creationRefused(temporaryID: "local-1"),
            MutationConflictError.noConflict(id: "m-1"), MutationConflictError.replacedByServerCopy,
            MutationStorageError(operation: .save, id: "m1", file: file, underlyingError: POSIXError(.ENOSPC)),
            MutationStorageError(operation: .remove, id: "m1", file: file, underlyingError: POSIXError(.EACCES)),
            MutationStorageError(
                operation: .load, id: nil, file: file.deletingLastPathComponent(),
                underlyingError: POSIXError(.ENOENT)),
            MutationStorageError(
                operation: .load, id: nil, file: file,
                underlyingError: DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "Not JSON."))),
            DiskCacheError<String>(
                operation: .save, key: "u1", file: URL(fileURLWithPath: "/tmp/cache/1.entry"),
                underlyingError: POSIXError(.ENOSPC)),
            DiskCacheError<String>(
                operation: .removeAll, key: nil, file: URL(fileURLWithPath: "/tmp/cache"),
                underlyingError: POSIXError(.EACCES)),
            ProcessSharingError(
                file: URL(fileURLWithPath: "/tmp/group/friends.journal"), underlyingError: POSIXError(.EACCES)),
            LocalFriendsLoader.Error.empty,
            ServerSentEventsFriendsUpdates.StreamEnded(),
            ServerSentEventsFriendsUpdates.UnexpectedStatus(statusCode: 503),
            ServerSentEventParser.EventTooLarge(limit: 1 << 20),
            FriendsAPIError.invalidData, FriendsAPIError.responseTooLarge(limit: 64 << 20),
            FriendsRepository.DeletionUnavailable(),
            URLSessionHTTPClient.UnexpectedResponse(),
            URLSessionHTTPClient.ResponseTooLarge(limit: 64 << 20),
            SQLiteError(code: 26, message: "file is not a database", operation: "open"),
            SQLiteFriendsStore.FileChanged(change: .deleted, path: "/tmp/friends.sqlite"),
        ]
    }

    func test_everyPublicErrorType_hasASample_andReadsAsASentence() throws {
        let declared = try publicErrorTypes()
        XCTAssertGreaterThan(declared.count, 15, "the scan finds the error types: \(declared.sorted())")
        let sampled = Set(samples.map { Self.name(of: $0) })
        for name in declared.sorted() {
            XCTAssertTrue(sampled.contains(name), "\(name) is a public error with no sample here: add one")
        }
        for error in samples {
            let text = error.localizedDescription
            XCTAssertFalse(text.contains("could not be completed"), "\(Self.name(of: error)): \(text)")
            XCTAssertFalse(text.contains("error 1.)"), "\(Self.name(of: error)): \(text)")
            XCTAssertTrue(text.first?.isUppercase == true && text.hasSuffix("."), "a sentence: \(text)")
            XCTAssertEqual(text, String(describing: error), "\(Self.name(of: error))")
            XCTAssertFalse(text.range(of: "[0-9]{6,} bytes", options: .regularExpression) != nil, text)
        }
    }

    func test_sizesReadInWords() {
        XCTAssertTrue(FriendsAPIError.responseTooLarge(limit: 64 << 20).localizedDescription.contains("64 MiB"))
        XCTAssertTrue(ServerSentEventParser.EventTooLarge(limit: 1 << 20).localizedDescription.contains("1 MiB"))
    }

    /// The names of the public types of the package's libraries that conform to `Error` where they are declared.
    private func publicErrorTypes() throws -> Set<String> {
        var names = Set<String>()
        let declaration = try NSRegularExpression(
            pattern: #"public (?:final )?(?:struct|enum|class) (\w+)(?:<[^>]*>)?\s*:\s*([^{]*)\{"#)
        for folder in ["Sources/Loading", "Sources/FriendsDomain", "Sources/LoadingTestSupport"] {
            let enumerator = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)
            while let path = enumerator?.nextObject() as? String {
                guard path.hasSuffix(".swift") else { continue }
                let text = try String(
                    contentsOf: root.appendingPathComponent(folder).appendingPathComponent(path), encoding: .utf8)
                let range = NSRange(text.startIndex..., in: text)
                for match in declaration.matches(in: text, range: range) {
                    let name = String(text[Range(match.range(at: 1), in: text)!])
                    let conformances = text[Range(match.range(at: 2), in: text)!].split(separator: ",").map {
                        $0.trimmingCharacters(in: .whitespacesAndNewlines)
                    }
                    if conformances.contains("Error") || conformances.contains("Swift.Error") { names.insert(name) }
                }
            }
        }
        return names
    }

    private static func name(of error: any Error) -> String {
        let full = String(describing: type(of: error))
        return String(full.prefix { $0 != "<" })
    }
}
