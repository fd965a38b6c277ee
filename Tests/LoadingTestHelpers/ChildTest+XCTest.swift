import Foundation
import XCTest

/// What a child test says when it is at the moment its parent kills it: the line's prefix.
package let killNowMarker = "KILL-NOW: "

extension XCTestCase {
    /// Runs `test` (`"ClassName/test_name"`, in this test's module: a child that skips unless started this way) as a
    /// process of its own with `environment` added, kills it with SIGKILL as soon as it says ``sayKillNow(_:)``, and
    /// returns what it said (`nil` when it ended without saying it).
    package func runChildUntilKilled(
        _ test: String, environment added: [String: String], file: StaticString = #filePath, line: UInt = #line
    ) throws -> String? {
        let child = try startChild(test, environment: added)
        let report = child.waitForLine(startingWith: killNowMarker)
        let printed = child.kill()  // at once: whatever was not on disk yet is lost
        XCTAssertTrue(child.wasKilled, "killed, not ended on its own:\n\(printed)", file: file, line: line)
        return report
    }

    /// Starts `test` (`"ClassName/test_name"`, in this test's module) as a child process with `environment` added;
    /// skips the test where a test binary cannot be run directly.
    package func startChild(_ test: String, environment added: [String: String]) throws -> ChildTest {
        let module = String(reflecting: type(of: self)).split(separator: ".").first.map(String.init) ?? ""
        do {
            return try ChildTest("\(module).\(test)", environment: added)
        } catch let error as ChildTestUnavailable {
            throw XCTSkip(error.description)
        }
    }

    /// Says, in a child, that it is at the moment its parent kills it (see ``runChildUntilKilled(_:environment:file:line:)``).
    package func sayKillNow(_ report: String) {
        ChildTest.say(killNowMarker + report)
    }

    /// Waits, in a child, for its parent to kill it (after ``sayKillNow(_:)``); if the parent never does, returns after
    /// the watchdog, and the parent's test fails.
    package func waitToBeKilled() {
        ChildTest.waitToBeKilled()
    }
}
