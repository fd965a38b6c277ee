import AsyncHTTPClient
import Foundation

/// Requests at a steady rate (open loop: sent on time whatever the answers take), spread over the targets in turn,
/// for symbols drawn from `keys` with a skew (a few are asked for often, most once or never), and what they cost:
/// latencies, the targets' CPU time per request (from `/proc`), and the upstream's calls per symbol.
struct Load {
    let targets: [String]
    let pids: [Int32]
    let upstream: String
    let rate: Int
    let seconds: Int
    let keys: Int
    /// How skewed the symbols are: symbol `keys * u^skew` for `u` uniform in 0..<1 (1: uniform).
    let skew: Double
    let maxAge: Double
    let label: String

    func run() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 256)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        _ = try await callLog(client)  // the calls made before this run (the instances' start) do not count
        let cpuBefore = pids.map(cpuSeconds(of:))
        let total = rate * seconds
        let symbols = (0..<total).map { _ in "Q\(Int(Double(keys) * pow(Double.random(in: 0..<1), skew)))" }
        let begin = ContinuousClock.now
        let latencies = await withTaskGroup(of: Double?.self) { group in
            var sent = 0
            while sent < total {
                let due = min(total, Int((ContinuousClock.now - begin) / .seconds(1) * Double(rate)) + 1)
                while sent < due {
                    let (target, symbol) = (targets[sent % targets.count], symbols[sent])
                    group.addTask { await request(symbol, from: target, with: client) }
                    sent += 1
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
            var latencies: [Double] = []
            for await latency in group { latency.map { latencies.append($0) } }
            return latencies.sorted()
        }
        let elapsed = (ContinuousClock.now - begin) / .seconds(1)
        let cpu = zip(pids.map(cpuSeconds(of:)), cpuBefore).reduce(0) { $0 + $1.0 - $1.1 }
        let calls = try await callLog(client)
        report(
            latencies: latencies, failures: total - latencies.count, elapsed: elapsed, cpu: cpu, calls: calls,
            requestedKeys: Set(symbols).count)
        try await client.shutdown()
    }

    /// One request's latency in seconds, or `nil` when it failed.
    private func request(_ symbol: String, from target: String, with client: HTTPClient) async -> Double? {
        let start = ContinuousClock.now
        do {
            let response = try await client.execute(
                HTTPClientRequest(url: "\(target)/quotes/\(symbol)"), timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 1 << 16)
            guard response.status == .ok else { return nil }
            return (ContinuousClock.now - start) / .seconds(1)
        } catch {
            return nil
        }
    }

    private func callLog(_ client: HTTPClient) async throws -> CallLog {
        let response = try await client.execute(HTTPClientRequest(url: "\(upstream)/calls"), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 30)
        return try JSONDecoder().decode(CallLog.self, from: Data(body.readableBytesView))
    }

    private func report(
        latencies: [Double], failures: Int, elapsed: Double, cpu: Double, calls: CallLog, requestedKeys: Int
    ) {
        let requests = latencies.count + failures
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1_000
        }
        // Each symbol's calls, in order: when, and which target made it (its index, from the `caller` header).
        var calledAt: [String: [(at: Double, by: String)]] = [:]
        for index in calls.symbols.indices {
            let by = targets.firstIndex { $0.hasSuffix(":\(calls.callers[index])") }.map { "instance \($0 + 1)" }
            calledAt[calls.symbols[index], default: []].append((calls.seconds[index], by ?? "an unknown caller"))
        }
        // The most calls any symbol got within one freshness window (any `maxAge` seconds).
        var mostPerWindow = 0
        var symbolsOverOne = 0
        var closest: [(symbol: String, gap: Double, by: String)] = []
        for (symbol, unsorted) in calledAt {
            let list = unsorted.sorted { $0.at < $1.at }
            var first = 0
            var most = 0
            for last in list.indices {
                while list[last].at - list[first].at >= maxAge { first += 1 }
                most = max(most, last - first + 1)
            }
            mostPerWindow = max(mostPerWindow, most)
            if most > 1 {
                symbolsOverOne += 1
                let pair = zip(list, list.dropFirst()).min { $0.1.at - $0.0.at < $1.1.at - $1.0.at }!
                closest.append((symbol, pair.1.at - pair.0.at, "\(pair.0.by), then \(pair.1.by)"))
            }
        }
        let line = [
            "\(label):", "\(requests) requests in \(String(format: "%.1f", elapsed)) s", "failures \(failures)",
            "p50 \(String(format: "%.2f", percentile(0.5))) ms", "p99 \(String(format: "%.2f", percentile(0.99))) ms",
            "max \(String(format: "%.2f", (latencies.last ?? .nan) * 1_000)) ms",
            "CPU \(String(format: "%.1f", cpu / Double(max(requests, 1)) * 1e6)) µs/request",
            "upstream calls \(calls.symbols.count) for \(requestedKeys) symbols asked",
            "most calls per symbol per \(Int(maxAge)) s window \(mostPerWindow) (symbols over one: \(symbolsOverOne))",
        ]
        print(line.joined(separator: "  "))
        for (symbol, gap, by) in closest.sorted(by: { $0.gap < $1.gap }).prefix(5) {
            print("  \(symbol): two upstream calls \(String(format: "%.3f", gap)) s apart (\(by))")
        }
        print(
            "RESULT label=\(label) requests=\(requests) failures=\(failures) cpu_us=\(cpu / Double(max(requests, 1)) * 1e6)"
                + " p50_ms=\(percentile(0.5)) p99_ms=\(percentile(0.99)) max_ms=\((latencies.last ?? .nan) * 1_000)"
                + " calls=\(calls.symbols.count)"
                + " most_per_window=\(mostPerWindow) over_one=\(symbolsOverOne)")
    }
}

/// The user and system CPU time a process used so far, in seconds (Linux's `/proc/PID/stat`).
func cpuSeconds(of pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return .nan }
    // After the command's name: state is field 3, utime and stime fields 14 and 15.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
