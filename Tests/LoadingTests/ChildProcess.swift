import Dispatch
import Foundation
import XCTest

/// What a child test says when it is at the moment the parent kills it: the line's prefix.
let killNowMarker = "KILL-NOW: "

extension XCTestCase {
    /// Runs this test binary on one test (`"ClassName/test_name"`, a child that skips unless started this way) with
    /// `environment` added, kills it with SIGKILL as soon as it prints a line starting with ``killNowMarker``, and
    /// returns that line without the marker (`nil` when the child ended without saying it).
    func runChildUntilKilled(
        _ test: String, environment added: [String: String], file: StaticString = #filePath, line: UInt = #line
    ) throws -> String? {
        #if os(Linux)
            let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
            throw XCTSkip("the child is started as this test binary, which only Linux runs directly")
        #endif
        let child = Process()
        child.executableURL = testBinary
        child.arguments = ["LoadingTests.\(test)"]
        child.environment = ProcessInfo.processInfo.environment.merging(added) { $1 }
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        try child.run()
        // A real process under test: a child that never reports is killed after a while, and the test fails.
        let pid = child.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)

        var text = ""
        var report: String?
        while report == nil {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }  // the child ended
            text += String(decoding: data, as: UTF8.self)
            report = text.split(separator: "\n").first { $0.hasPrefix(killNowMarker) }
                .map { String($0.dropFirst(killNowMarker.count)) }
        }
        kill(pid, SIGKILL)  // at once: whatever was not on disk yet is lost
        watchdog.cancel()
        child.waitUntilExit()
        XCTAssertEqual(
            child.terminationReason, .uncaughtSignal, "killed, not ended on its own:\n\(text)", file: file, line: line)
        return report
    }

    /// Says the child is at the moment its parent kills it (see ``runChildUntilKilled(_:environment:file:line:)``).
    func sayKillNow(_ report: String) {
        FileHandle.standardOutput.write(Data((killNowMarker + report + "\n").utf8))
    }
}
