import Dispatch
import Foundation
import LoadingTestHelpers
import XCTest

@testable import Loading

final class ChangeJournalTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = try makeTemporaryFolder("journal")
    }

    private var file: URL { directory.appendingPathComponent("changes.journal") }

    private func key(_ text: String) -> Data { Data(text.utf8) }

    func test_aReader_learnsTheOtherJournalsChanges_inOrder_andNotItsOwn() throws {
        let app = try ChangeJournal(file: file)
        let widget = try ChangeJournal(file: file)

        try app.append(.saved(key("u1")))
        try widget.append(.saved(key("u9")))
        try app.append(.removed(key("u2")))
        try app.append(.cleared)

        XCTAssertEqual(widget.readChanges(), [.saved(key("u1")), .removed(key("u2")), .cleared])
        XCTAssertEqual(app.readChanges(), [.saved(key("u9"))])
        XCTAssertEqual(widget.readChanges(), [], "each change is learnt once")
    }

    func test_aJournalOpenedLater_startsAtTheEnd() throws {
        let app = try ChangeJournal(file: file)
        try app.append(.saved(key("before")))
        let widget = try ChangeJournal(file: file)
        try app.append(.saved(key("after")))

        XCTAssertEqual(widget.readChanges(), [.saved(key("after"))])
    }

    func test_aRecordTornByAKilledWriter_isSkipped_andHidesNothingAfterIt() throws {
        let reader = try ChangeJournal(file: file)
        let record = ChangeJournal.record(.saved(key("torn")), writer: 7, sequence: 1, order: 1)
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(record.prefix(record.count / 2)))  // the writer died here
        try handle.close()
        let writer = try ChangeJournal(file: file)
        try writer.append(.saved(key("next")))

        XCTAssertEqual(reader.readChanges(), [.saved(key("next"))])
    }

    func test_aRecord_isWrittenInTheFormatEveryVersionReads() {
        // Other processes may run another version of the library: the bytes of a record never change.
        func text(_ change: ChangeJournal.Change, writer: UInt64, sequence: UInt64, order: UInt64) -> String {
            String(
                decoding: ChangeJournal.record(change, writer: writer, sequence: sequence, order: order), as: UTF8.self)
        }
        XCTAssertEqual(
            text(.saved(key(#"["friend-1"]"#)), writer: 0xabc, sequence: 5, order: 42),
            "\nC2 abc 5 42 s WyJmcmllbmQtMSJd 8b1796596acac429\n")
        XCTAssertEqual(
            text(.removed(key("[7]")), writer: .max, sequence: .max, order: 1),
            "\nC2 ffffffffffffffff 18446744073709551615 1 r Wzdd 8e114923b3f8085d\n")
        XCTAssertEqual(text(.cleared, writer: 1, sequence: 1, order: 0), "\nC2 1 1 0 c - 77e7bb0513141a7a\n")
        for length in 1..<40 {
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
            let record = ChangeJournal.record(.saved(bytes), writer: 9, sequence: 2, order: 3)
            XCTAssertEqual(
                ChangeJournal.decode(record[1..<(record.count - 1)])?.1,
                ChangeJournal.Record(change: .saved(bytes), order: 3), "a key of \(length) bytes reads back")
            XCTAssertTrue(
                String(decoding: record, as: UTF8.self).contains(" s \(bytes.base64EncodedString()) "),
                "a key of \(length) bytes in standard base 64")
        }
    }

    func test_aDamagedRecord_failsItsChecksum() {
        var record = ChangeJournal.record(.removed(key("u1")), writer: 7, sequence: 1, order: 1)
        XCTAssertNotNil(ChangeJournal.decode(record[1..<(record.count - 1)]))
        record[20] ^= 1
        XCTAssertNil(ChangeJournal.decode(record[1..<(record.count - 1)]))
    }

    func test_aRecord_carriesItsPlaceInTheOrder_andAnOlderRecordHasNone() throws {
        let app = try ChangeJournal(file: file)
        let widget = try ChangeJournal(file: file)
        try app.append(.saved(key("u1")), order: 41)
        XCTAssertEqual(widget.readRecords(), [ChangeJournal.Record(change: .saved(key("u1")), order: 41)])

        // A record of the first version, with no place in the order, still reads.
        let body = "C1 7 1 r \(key("u2").base64EncodedString())"
        let checksum = Array(body.utf8).reduce(UInt64(0xcbf2_9ce4_8422_2325)) {
            ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3
        }
        let line = Array("\(body) \(String(checksum, radix: 16))".utf8)
        XCTAssertEqual(
            ChangeJournal.decode(line[...]).map { $0.1 }, ChangeJournal.Record(change: .removed(key("u2")), order: nil))
    }

    /// Two journals over one file (two processes), four threads each, take places in the order at once: every place
    /// is taken once, and each thread's come in increasing order.
    func test_placesInTheOrder_areTakenOnce_acrossJournalsAndThreads() throws {
        let journals = [try ChangeJournal(file: file), try ChangeJournal(file: file)]
        let taken = Locked<[[UInt64]]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var mine: [UInt64] = []
            for _ in 0..<scaled(500, floor: 50) { mine.append((try? journals[thread % 2].takeOrder()) ?? 0) }
            taken.withLock { $0.append(mine) }
        }
        let all = taken.withLock { $0 }
        for mine in all { XCTAssertEqual(mine, mine.sorted(), "one thread's places increase") }
        let places = all.flatMap { $0 }
        XCTAssertEqual(Set(places).count, places.count, "no place is taken twice")
    }

    func test_theFileStaysBounded_andAReaderLosesNothingAcrossRotations() throws {
        let app = try ChangeJournal(file: file, maxBytes: 4096)
        let widget = try ChangeJournal(file: file, maxBytes: 4096)
        var learnt: [ChangeJournal.Change] = []
        for index in 0..<1_000 {
            try app.append(.saved(key("k\(index)")))
            if index % 40 == 0 { learnt += widget.readChanges() }
        }
        learnt += widget.readChanges()

        XCTAssertEqual(learnt, (0..<1_000).map { .saved(key("k\($0)")) })
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int)
        XCTAssertLessThanOrEqual(size, 4096 + 200)
    }

    /// One journal's threads append at once (a store's saves land on many threads), so that several reach the
    /// file's limit together: no append fails, and the reader learns each record at most once (every one, unless it
    /// fell a whole file behind).
    func test_oneJournalsThreads_appendingAcrossRotationsAtOnce_neverFail() throws {
        let app = try ChangeJournal(file: file, maxBytes: 4096)
        let widget = try ChangeJournal(file: file, maxBytes: 4096)
        let failures = Locked<[String]>([])
        let perThread = scaled(400, floor: 100)
        let writers = DispatchGroup()
        for thread in 0..<4 {
            DispatchQueue.global().async(group: writers) {
                for index in 0..<perThread {
                    do { try app.append(.saved(Data("t\(thread)-\(index)".utf8))) } catch {
                        failures.withLock { $0.append("t\(thread)-\(index): \(error)") }
                    }
                }
            }
        }
        var learnt: [ChangeJournal.Change] = []
        while writers.wait(timeout: .now()) == .timedOut { learnt += widget.readChanges() }
        learnt += widget.readChanges()

        XCTAssertEqual(failures.withLock { $0 }, [], "no append failed")
        let expected = Set((0..<4).flatMap { thread in (0..<perThread).map { "t\(thread)-\($0)" } })
        let saved = learnt.compactMap { change -> String? in
            if case .saved(let key) = change { String(decoding: key, as: UTF8.self) } else { nil }
        }
        XCTAssertEqual(Set(saved).count, saved.count, "no record learnt twice")
        XCTAssertEqual(Set(saved).subtracting(expected), [], "only what was appended")
        if !learnt.contains(.missed) {
            XCTAssertEqual(expected.subtracting(saved).sorted(), [], "a reader that kept up learnt them all")
        }
    }

    func test_aWriterKilledBetweenRenamingTheFileAndStartingTheNext_losesTheReaderNothing() throws {
        let app = try ChangeJournal(file: file, maxBytes: 4096)
        let widget = try ChangeJournal(file: file, maxBytes: 4096)
        var count = 0
        // Past one rotation: the widget's file is the previous one now, unread since.
        while !FileManager.default.fileExists(atPath: file.path + ".previous") {
            try app.append(.saved(key("k\(count)")))
            count += 1
        }
        try app.append(.saved(key("k\(count)")))
        count += 1
        // The next rotation's rename, and no new file: the app was killed between the two.
        XCTAssertEqual(rename(file.path, file.path + ".previous"), 0)

        let learnt = widget.readChanges().filter { $0 != .missed }

        XCTAssertEqual(learnt.last, .saved(key("k\(count - 1)")), "the records of the file renamed last are read")
        XCTAssertEqual(widget.readChanges(), [])
    }

    func test_aReaderTwoFilesBehind_learnsThatItMissedChanges() throws {
        let app = try ChangeJournal(file: file, maxBytes: 4096)
        let widget = try ChangeJournal(file: file, maxBytes: 4096)
        for index in 0..<300 { try app.append(.saved(key("k\(index)"))) }  // about three files' worth

        let learnt = widget.readChanges()
        XCTAssertTrue(learnt.contains(.missed))
        XCTAssertEqual(learnt.last, .saved(key("k299")))
        XCTAssertEqual(widget.readChanges(), [])
    }

    /// A second process appends while this one reads, and is killed mid-stream: this process learns every record it
    /// appended, in order, across the rotations both made, and nothing torn.
    func test_anotherProcess_killedWhileAppending_leavesEveryWholeRecordInOrder() throws {
        let parent = try ChangeJournal(file: file, maxBytes: 65536)
        let learnt = Locked<[ChangeJournal.Change]>([])
        let stop = Locked(false)
        let polling = DispatchGroup()
        DispatchQueue.global().async(group: polling) {
            while !stop.withLock({ $0 }) {
                let changes = parent.readChanges()
                learnt.withLock { $0 += changes }
                sched_yield()  // and reads again as soon as it may: a reader as fast as the machine lets it
            }
        }
        for index in 0..<300 { try parent.append(.saved(key("p\(index)"))) }  // rotations of the parent's own

        let said = try runChildUntilKilled(
            "ChangeJournalTests/test_appendsUntilKilled_whenStartedByTheJournalTests",
            environment: [Self.variable: file.path])
        stop.withLock { $0 = true }
        polling.wait()
        learnt.withLock { $0 += parent.readChanges() }

        let appended = try XCTUnwrap(said.flatMap { Int($0) }, "the child said how many it appended")
        // Every whole record, in order, nothing torn; a reader that fell more than a file behind (a loaded machine)
        // is told so where it lost records, and only there.
        var next = 0
        var missedAny = false
        for change in learnt.withLock({ $0 }) {
            switch change {
            case .saved(let key):
                let index = try XCTUnwrap(Int(String(decoding: key, as: UTF8.self).dropFirst()), "a whole record")
                XCTAssertTrue(index == next || (missedAny && index > next), "record \(index) after \(next - 1)")
                (next, missedAny) = (index + 1, false)
            case .missed: missedAny = true
            case .removed, .cleared: XCTFail("a change the child did not make")
            }
        }
        XCTAssertGreaterThanOrEqual(next, appended)
    }

    private static let variable = "LOADING_JOURNAL_CHILD"

    func test_appendsUntilKilled_whenStartedByTheJournalTests() throws {
        guard let path = ProcessInfo.processInfo.environment[Self.variable] else {
            throw XCTSkip("the child process of ChangeJournalTests: it runs only when that test starts it")
        }
        let journal = try ChangeJournal(file: URL(fileURLWithPath: path), maxBytes: 65536)
        var index = 0
        while true {
            try journal.append(.saved(key("c\(index)")))
            index += 1
            if index == 3_000 { sayKillNow("\(index)") }
        }
    }
}
