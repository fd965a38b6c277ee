import Foundation
import Logging
import PostgresNIO
import XCTest

/// Another instance's transaction, on a connection of its own: it runs a statement and holds its row locks,
/// uncommitted, until the test commits it.
final class HeldTransaction: Sendable {
    private let committing: AsyncStream<Void>.Continuation
    private let running: Task<Void, any Error>

    /// Begins a transaction, runs `statement`, and returns once it ran (its rows locked until ``commit()``).
    init(_ statement: PostgresQuery, on client: PostgresClient) async throws {
        let (ran, tellRan) = AsyncStream.makeStream(of: Void.self)
        let (commit, committing) = AsyncStream.makeStream(of: Void.self)
        self.committing = committing
        running = Task {
            defer { tellRan.finish() }  // also when it failed: the failure is the commit's
            try await client.withConnection { connection in
                let logger = Logger(label: "HeldTransaction")
                try await connection.query("BEGIN", logger: logger)
                try await connection.query(statement, logger: logger)
                tellRan.yield()
                for await _ in commit { break }
                try await connection.query("COMMIT", logger: logger)
            }
        }
        for await _ in ran { break }
    }

    /// Commits the transaction, throwing its failure if it had one.
    func commit() async throws {
        committing.yield()
        committing.finish()
        try await running.value
    }

    /// Waits until another session of the database waits for a row lock (a statement blocked by this transaction),
    /// for a generous watchdog at most; returns whether one did.
    static func untilASessionWaitsForALock(on client: PostgresClient) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let rows = try await client.query(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND datname = current_database()
                """)
            for try await waiting in rows.decode(Int.self) where waiting > 0 { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return false
    }
}
