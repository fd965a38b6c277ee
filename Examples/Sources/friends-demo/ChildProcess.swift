import Dispatch
import Foundation
import Loading

/// This program started again as a child process with `arguments`, its output read line by line as it comes.
final class ChildProcess: Sendable {
    private let process: Process
    private let lines = Locked<(lines: [String], ended: Bool)>(([], false))

    init(arguments: [String]) throws {
        let process = Process()
        #if os(Linux)
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
            process.executableURL = Bundle.main.executableURL
        #endif
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = process
        // Read off the cooperative pool: the reads block.
        DispatchQueue.global().async { [lines] in
            var partial = ""
            while true {
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { return lines.withLock { $0.ended = true } }
                partial += String(decoding: data, as: UTF8.self)
                var complete = partial.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                partial = complete.removeLast()
                lines.withLock { $0.lines += complete }
            }
        }
    }

    /// The first line printed from the `from`th on that satisfies `condition` (waiting up to `timeout` for it), and
    /// its index; `nil` when the child ends or the time runs out first.
    func line(
        from index: Int = 0, timeout: Duration = .seconds(60), where condition: @Sendable (String) -> Bool
    ) async -> (line: String, index: Int)? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let (printed, ended) = lines.withLock { ($0.lines, $0.ended) }
            if let found = printed.indices.dropFirst(index).first(where: { condition(printed[$0]) }) {
                return (printed[found], found)
            }
            if ended { return nil }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    /// Ends the child with SIGKILL at once, and waits until it has.
    func kill() {
        _ = Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
