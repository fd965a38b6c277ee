import Foundation
import Loading
import LoadingPostgres
import NIOConcurrencyHelpers

/// The same service by hand with async/await, the baseline the store is measured against: a dictionary of quotes
/// with their dates, one task per symbol in flight, the shared table read with a timeout, the lease and the upstream,
/// in the store's order. It uses the same PostgreSQL classes, so that what differs is the store.
final class PlainQuotes: QuoteSource {
    private struct Remembered {
        let quote: Quote
        let savedAt: Date
    }

    private let memory = NIOLockedValueBox<[String: Remembered]>([:])
    private let inFlight = NIOLockedValueBox<[String: Task<Quote, any Error>]>([:])
    private let table: PostgresLevel<String, Quote>
    private let leases: PostgresFetchLease<String>
    private let upstream: Upstream
    private let maxAge: TimeInterval
    private let levelTimeout: Duration
    private let leaseWait: Duration

    init(
        table: PostgresLevel<String, Quote>, leases: PostgresFetchLease<String>, upstream: Upstream,
        options: ServiceOptions
    ) {
        self.table = table
        self.leases = leases
        self.upstream = upstream
        maxAge = options.maxAge / .seconds(1)
        levelTimeout = options.levelTimeout
        leaseWait = options.leaseWait
    }

    /// Nothing to let go of: each request gives its lease back itself, and the server answered them all.
    func shutDown() async {}

    func quote(_ symbol: String) async throws -> Quote {
        if let remembered = memory.withLockedValue({ $0[symbol] }), isFresh(remembered.savedAt) {
            return remembered.quote
        }
        let task = inFlight.withLockedValue { tasks in
            if let running = tasks[symbol] { return running }
            let started = Task { try await self.load(symbol) }
            tasks[symbol] = started
            return started
        }
        return try await task.value
    }

    /// The shared table, else the upstream under the lease (unless the table got the value meanwhile), else (another
    /// instance holds it) the holder's value in the table, else the upstream after all.
    private func load(_ symbol: String) async throws -> Quote {
        defer { inFlight.withLockedValue { $0[symbol] = nil } }
        let found = await sharedValue(symbol)
        if let found, isFresh(found.savedAt) { return remember(found.value, savedAt: found.savedAt, for: symbol) }
        // What another instance saves from now on, or saved after what was found, is new enough.
        let began = Date()
        let isNewer = { (savedAt: Date) in savedAt >= began || savedAt > found?.savedAt ?? .distantPast }
        let holdsLease = (try? await leases.acquire(symbol, for: .seconds(10))) ?? true  // unreachable: fetch
        if holdsLease {
            // The previous holder may have saved it and given the lease back since the miss.
            if let shared = await sharedValue(symbol), isNewer(shared.savedAt) {
                try? await leases.release(symbol)
                return remember(shared.value, savedAt: shared.savedAt, for: symbol)
            }
        } else {
            let deadline = ContinuousClock.now + leaseWait
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                if let shared = await sharedValue(symbol), isNewer(shared.savedAt) {
                    return remember(shared.value, savedAt: shared.savedAt, for: symbol)
                }
            }
        }
        let fetched: Quote
        do {
            fetched = try await upstream.quote(symbol)
        } catch {
            if holdsLease { try? await leases.release(symbol) }
            throw error
        }
        let savedAt = Date()
        try? await table.save(fetched, for: symbol, savedAt: savedAt)
        if holdsLease { try? await leases.release(symbol) }
        return remember(fetched, savedAt: savedAt, for: symbol)
    }

    private func isFresh(_ savedAt: Date) -> Bool {
        Date().timeIntervalSince(savedAt) < maxAge
    }

    private func remember(_ quote: Quote, savedAt: Date, for symbol: String) -> Quote {
        memory.withLockedValue { $0[symbol] = Remembered(quote: quote, savedAt: savedAt) }
        return quote
    }

    /// The table's row for `symbol`, or `nil` when it has none, fails or takes longer than the level timeout.
    private func sharedValue(_ symbol: String) async -> CachedValue<Quote>? {
        await withTaskGroup(of: CachedValue<Quote>?.self) { group in
            group.addTask { [table] in try? await table.value(for: symbol) }
            group.addTask { [levelTimeout] in
                try? await Task.sleep(for: levelTimeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
