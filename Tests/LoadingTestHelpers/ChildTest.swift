import Dispatch
import Foundation

/// One test of this test binary run as a second process (an app's widget, a process killed mid-write): started with
/// variables added to its environment, its output read as it comes, and killed with SIGKILL once the watchdog ran out.
///
/// A child test is an ordinary test that skips unless its variable is set, so that it runs only when a parent
/// starts it. It says what it did on its standard output; ``waitForLine(startingWith:)`` reads it up to a line, and
/// ``kill()`` ends it at that moment, losing whatever was not on disk yet.
/// Used from the thread of the test that started it.
package final class ChildTest {
    private let process: Process
    private let output: FileHandle
    private let watchdog: DispatchWorkItem
    /// What the child printed so far.
    private var text = ""
    /// Whether its output ended (it ended, or was killed).
    private var hasEnded = false

    /// Starts `test` (`"Module.Class/test_name"`) of this test binary with `environment` added.
    package init(_ test: String, environment added: [String: String]) throws {
        #if os(Linux)
            let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
            throw ChildTestUnavailable()
        #endif
        let process = Process()
        process.executableURL = binary
        process.arguments = [test]
        process.environment = ProcessInfo.processInfo.environment.merging(added) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        output = pipe.fileHandleForReading
        let pid = process.processIdentifier
        watchdog = DispatchWorkItem { _ = Foundation.kill(pid, SIGKILL) }
        // A watchdog, not a wait: a child that hangs is killed, and its parent's test fails on what it did not say.
        DispatchQueue.global().asyncAfter(deadline: .now() + .watchdog, execute: watchdog)
    }

    /// The process id of the child.
    package var processIdentifier: Int32 { process.processIdentifier }

    /// Whether the child still runs.
    package var isRunning: Bool { process.isRunning }

    /// Reads the child's output until a line starting with `prefix`, and returns the rest of that line; `nil` when
    /// the child ended (or was killed by the watchdog) without printing one.
    package func waitForLine(startingWith prefix: String) -> String? {
        while true {
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return String(line.dropFirst(prefix.count))
            }
            if hasEnded { return nil }
            readMore()
        }
    }

    /// Kills the child with SIGKILL now, and waits for it to end; returns everything it printed.
    @discardableResult
    package func kill() -> String {
        _ = Foundation.kill(process.processIdentifier, SIGKILL)
        return waitForEnd()
    }

    /// Waits for the child to end by itself (or by the watchdog), reading what it prints; returns all of it.
    package func waitForEnd() -> String {
        while !hasEnded { readMore() }
        process.waitUntilExit()
        watchdog.cancel()
        return text
    }

    /// Whether the child ended by a signal (killed), not by returning.
    package var wasKilled: Bool { process.terminationReason == .uncaughtSignal }

    private func readMore() {
        let data = output.availableData  // blocks until the child prints, or its output ends
        if data.isEmpty { hasEnded = true } else { text += String(decoding: data, as: UTF8.self) }
    }

    /// Waits, in the child, for its parent to kill it: the parent kills it once it read what it waited for. Returns
    /// (and the child's test then fails in its parent) only when the parent never does, after the watchdog.
    package static func waitToBeKilled() {
        _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .watchdog)
    }

    /// Says, in the child, `line` to the parent: one line of its output, written at once.
    package static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// Why a child test cannot run: only Linux runs a test binary directly.
package struct ChildTestUnavailable: Error, CustomStringConvertible {
    package var description: String { "a child test is started as this test binary, which only Linux runs directly" }
}
