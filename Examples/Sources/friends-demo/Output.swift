import Foundation
import FriendsDomain

/// The demo's printed story: aligned rows, one per step, then a summary.
struct Output: Sendable {
    let quiet: Bool

    /// Wide enough for the longest step's title and a space.
    private static let titleWidth = 32
    private static let sourceWidth = 10

    func header(_ server: String, database: String) {
        say("Loading friends: memory, else database, else network.")
        say("  API       \(server)")
        say("  database  \(database)")
        say("")
        say(
            pad("  step", Self.titleWidth + 2) + pad("source", Self.sourceWidth) + pad("time", 9) + pad("friends", 9)
                + "sources tried")
        say("  " + String(repeating: "-", count: Self.titleWidth + Self.sourceWidth + 9 + 9 + 30))
    }

    func step(
        _ title: String,
        outcomes: [FriendsComposer.Source: Outcome],
        count: Int?,
        elapsed: Duration,
        passed: Bool,
        error: String?
    ) {
        let order: [FriendsComposer.Source] = [.memory, .database, .network]
        let tried = order.compactMap { source in outcomes[source].map { "\(source.rawValue) \($0.rawValue)" } }
        let source = order.first { outcomes[$0] == .hit }?.rawValue ?? "-"
        row(
            title, source: source, count: count, elapsed: elapsed, passed: passed,
            note: tried.joined(separator: ", ") + (error.map { "  error: \($0)" } ?? ""))
    }

    func row(_ title: String, source: String, count: Int?, elapsed: Duration, passed: Bool, note: String) {
        let mark = passed ? "✓" : "✗"
        let line =
            "\(mark) " + pad(title, Self.titleWidth) + pad(source, Self.sourceWidth) + pad(Self.format(elapsed), 9)
            + pad(count.map(String.init) ?? "-", 9) + note
        if passed { say(line) } else { shout(line) }
    }

    func detail(_ text: String) {
        say(String(repeating: " ", count: Self.titleWidth + 2) + "↳ " + text)
    }

    func skip(_ title: String, because reason: String) {
        say("- " + pad(title, Self.titleWidth) + "skipped: \(reason)")
    }

    func failure(_ title: String, _ message: String) {
        shout("✗ " + pad(title, Self.titleWidth) + message)
    }

    /// Prints the summary (always, even when quiet) and returns whether every step passed.
    func summary(_ results: [(String, Bool)]) -> Bool {
        let failed = results.filter { !$0.1 }.map(\.0)
        say("")
        if failed.isEmpty {
            print("friends-demo: all \(results.count) steps behaved as expected.")
        } else {
            shout(
                "friends-demo: \(failed.count) of \(results.count) steps did not behave as expected: \(failed.joined(separator: ", "))."
            )
        }
        return failed.isEmpty
    }

    private func say(_ text: String) {
        if !quiet { print(text) }
    }

    private func shout(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    /// `duration` as the story prints it ("12 ms"), or "never" for `nil`.
    static func describe(_ duration: Duration?) -> String {
        duration.map(format) ?? "never"
    }

    private static func format(_ duration: Duration) -> String {
        let milliseconds = Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
        return milliseconds < 1 ? String(format: "%.2f ms", milliseconds) : String(format: "%.0f ms", milliseconds)
    }
}
