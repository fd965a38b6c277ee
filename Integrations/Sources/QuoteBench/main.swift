// The quote service's bench: `QuoteBench upstream` is the fake upstream the instances call, counting its calls per
// symbol; `QuoteBench load` sends requests at a steady rate from a process of its own and prints what they cost.
// `Scripts/quote-load.sh` runs both around two instances of the service. `QuoteBench proxy` stands between the
// instances and PostgreSQL, and turns slow or hangs when told (`Scripts/quote-faults.sh`).
//
//     QuoteBench upstream --port 9000 --latency-ms 20 --slow-latency-ms 3000   # symbols SLOW…: the slow latency
//     QuoteBench load --targets http://127.0.0.1:8081,http://127.0.0.1:8082 --pids 4242,4243 \
//         --upstream http://127.0.0.1:9000 --rate 1000 --seconds 20 --keys 100000 --max-age 5 --label store
//     QuoteBench proxy --port 6543 --server-port 5432
import FaultInjection
import Foundation

let options = BenchOptions(CommandLine.arguments.dropFirst())
switch options.command {
case "upstream":
    let upstream = FakeUpstream(
        latency: .milliseconds(options.number("latency-ms", 20)),
        slowLatency: .milliseconds(options.number("slow-latency-ms", 3_000)))
    try await upstream.run(port: options.number("port"))
case "load":
    let load = Load(
        targets: options.text("targets").split(separator: ",").map(String.init),
        pids: options.text("pids").split(separator: ",").compactMap { Int32($0) },
        upstream: options.text("upstream"), rate: options.number("rate", 1_000),
        seconds: options.number("seconds", 20), keys: options.number("keys", 100_000),
        skew: Double(options.number("skew", 8)),
        maxAge: Double(options.number("max-age", 5)), label: options.text("label", "run"))
    try await load.run()
case "proxy":
    try runProxy(
        listeningOn: options.number("port"), server: options.text("server-host", "127.0.0.1"),
        serverPort: options.number("server-port"))
default:
    options.fail("usage: QuoteBench upstream|load|proxy --option value...")
}

/// A faulty proxy in front of the server, told what to do on its standard input, a line at a time: `pass`,
/// `delay MILLISECONDS` (each message), `hang` (no message goes on). Stopping it is ending the process.
func runProxy(listeningOn port: Int, server: String, serverPort: Int) throws {
    let proxy = try FaultyProxy(host: server, port: serverPort, listeningOn: port)
    while let line = readLine() {
        let words = line.split(separator: " ")
        switch (words.first, words.dropFirst().first.flatMap { Int($0) }) {
        case ("pass", _): proxy.behave(.passing)
        case ("delay", let milliseconds?): proxy.behave(.delaying(.milliseconds(milliseconds)))
        case ("hang", _): proxy.behave(.hanging)
        default: FileHandle.standardError.write(Data("QuoteBench proxy: \(line)? (pass, delay MS, hang)\n".utf8))
        }
    }
    while true { sleep(3_600) }  // told nothing more: pass on as told, until ended
}

/// The command and its `--name value` options.
struct BenchOptions {
    let command: String
    private var values: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) {
        var remaining = arguments
        command = remaining.popFirst() ?? ""
        while let name = remaining.popFirst(), name.hasPrefix("--"), let value = remaining.popFirst() {
            values[String(name.dropFirst(2))] = value
        }
    }

    func text(_ name: String, _ fallback: String? = nil) -> String {
        guard let value = values[name] ?? fallback else { fail("QuoteBench \(command) needs --\(name).") }
        return value
    }

    func number(_ name: String, _ fallback: Int? = nil) -> Int {
        guard let value = Int(text(name, fallback.map(String.init))) else { fail("--\(name) needs a number.") }
        return value
    }

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(2)
    }
}
