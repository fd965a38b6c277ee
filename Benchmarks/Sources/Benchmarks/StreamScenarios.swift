import Foundation
import Loading
import OpenCombine

/// Scenario 7: values through subject -> map -> filter -> sink (every value passes the filter).
func filterThroughputScenario(values: Int) -> Scenario {
    let transform: @Sendable (Int) -> Int = opaqueFunction { $0 &+ 1 }
    let isIncluded: @Sendable (Int) -> Bool = opaqueFunction { $0 > 0 }
    let sum = Tally()
    let onValue: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    @Sendable func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let plain = Variant(name: "plain loop") { count in
        for index in 0..<count {
            let value = transform(index)
            if isIncluded(value) { onValue(value) }
        }
        return checksum()
    }
    let stream = Variant(name: "EventStream (StreamSubject)") { count in
        let subject = StreamSubject<Int, Never>()
        let subscription = subject.stream.map(transform).filter(isIncluded).sink(receiveValue: onValue)
        for index in 0..<count { subject.send(index) }
        subscription.cancel()
        return checksum()
    }
    let openCombine = Variant(name: "OpenCombine (PassthroughSubject)") { count in
        let subject = OpenCombine.PassthroughSubject<Int, Never>()
        let subscription = subject.map(transform).filter(isIncluded).sink(receiveValue: onValue)
        for index in 0..<count { subject.send(index) }
        subscription.cancel()
        return checksum()
    }
    return Scenario(
        title: "7. Per-value throughput: subject -> map -> filter -> sink",
        unit: "values", operations: values, reference: "plain loop", variants: [plain, stream, openCombine],
        targets: [
            .instructions(
                "EventStream (StreamSubject)", atMost: 400,
                label: "stream per value, subject -> map -> filter -> sink, instructions")
        ],
        expectedChecksum: { count in count &* (count &+ 1) / 2 })
}

/// Scenario 14: values sent round-robin into 2, 8 or 64 subjects merged into one sink, against OpenCombine merging
/// as many `PassthroughSubject`s with `flatMap` (OpenCombine 0.14 has no `MergeMany`).
func mergeScenario(values: Int) -> Scenario {
    let widths = [2, 8, 64]
    let sum = Tally()
    let onValue: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    @Sendable func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    var variants: [Variant] = []
    for width in widths {
        variants.append(
            Variant(name: "OpenCombine flatMap, \(width) streams") { count in
                let subjects = (0..<width).map { _ in OpenCombine.PassthroughSubject<Int, Never>() }
                let merged = OpenCombine.Publishers.Sequence<[PassthroughSubject<Int, Never>], Never>(
                    sequence: subjects
                )
                .flatMap { $0 }
                let subscription = merged.sink(receiveValue: onValue)
                for index in 0..<count { subjects[index % width].send(index) }
                subscription.cancel()
                return checksum()
            })
        variants.append(
            Variant(name: "EventStream.merge, \(width) streams") { count in
                let subjects = (0..<width).map { _ in StreamSubject<Int, Never>() }
                let subscription = EventStream.merge(subjects.map(\.stream)).sink(receiveValue: onValue)
                for index in 0..<count { subjects[index % width].send(index) }
                subscription.cancel()
                return checksum()
            })
    }
    return Scenario(
        title: "14. Merge of 2, 8 and 64 streams: one value at a time, round-robin",
        unit: "values", operations: values, reference: "OpenCombine flatMap, 2 streams", variants: variants,
        targets: widths.map { width in
            .instructions(
                "EventStream.merge, \(width) streams", atMost: 0.5, of: "OpenCombine flatMap, \(width) streams",
                label: "merge of \(width) streams per value, instructions vs OpenCombine")
        },
        expectedChecksum: { count in count &* (count &- 1) / 2 })
}

/// Scenario 15: one subject, 1 to 1,000 subscribers; an operation is one send (delivered to every subscriber).
func fanOutScenario(sends: Int) -> Scenario {
    let audiences = [1, 10, 100, 1_000]
    let sum = Tally()
    let onValue: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    var variants: [Variant] = []
    for subscribers in audiences {
        // Normalised to the checksum of one delivery per send.
        @Sendable func checksum() -> Int {
            defer { sum.value = 0 }
            return sum.value / subscribers
        }
        variants.append(
            Variant(name: "OpenCombine PassthroughSubject, \(subscribers)") { count in
                let subject = OpenCombine.PassthroughSubject<Int, Never>()
                let subscriptions = (0..<subscribers).map { _ in subject.sink(receiveValue: onValue) }
                for index in 0..<count { subject.send(index) }
                for subscription in subscriptions { subscription.cancel() }
                return checksum()
            })
        variants.append(
            Variant(name: "StreamSubject, \(subscribers)") { count in
                let subject = StreamSubject<Int, Never>()
                let subscriptions = (0..<subscribers).map { _ in subject.stream.sink(receiveValue: onValue) }
                for index in 0..<count { subject.send(index) }
                for subscription in subscriptions { subscription.cancel() }
                return checksum()
            })
    }
    return Scenario(
        title: "15. Subject fan-out: one send to 1, 10, 100 and 1,000 subscribers",
        unit: "sends", operations: sends, reference: "OpenCombine PassthroughSubject, 1", variants: variants,
        targets: [
            .instructions(
                "StreamSubject, 1", atMost: 250, label: "subject fan-out, instructions per delivery, 1 subscriber"),
            .instructions(
                "StreamSubject, 100", atMost: 100, per: 100,
                label: "subject fan-out, instructions per delivery, 100 subscribers"),
        ],
        expectedChecksum: { count in count &* (count &- 1) / 2 },
        countNotes: { table in
            var lines = ["  instructions per delivery:"]
            for kind in ["OpenCombine PassthroughSubject", "StreamSubject"] {
                let cells = audiences.map { subscribers in
                    table.instructions("\(kind), \(subscribers)").map {
                        String(format: "%d: %.0f", subscribers, $0 / Double(subscribers))
                    } ?? "\(subscribers): -"
                }
                lines.append(
                    "    " + kind.padding(toLength: 32, withPad: " ", startingAt: 0) + cells.joined(separator: "  "))
            }
            return lines
        })
}

/// Scenario 16: one write to a key observed by 100 screens, against OpenCombine's `CurrentValueSubject` with 100
/// subscribers (and the library's own current-value subject).
func storeObservationScenario(writes: Int) -> Scenario {
    let observers = 100
    let sum = Tally()
    let onValue: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    // Every observer also receives the value there was when it subscribed (0): the checksum is unaffected.
    @Sendable func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value / observers
    }
    let openCombine = Variant(name: "OpenCombine CurrentValueSubject") { count in
        let subject = OpenCombine.CurrentValueSubject<Int, Never>(0)
        let subscriptions = (0..<observers).map { _ in subject.sink(receiveValue: onValue) }
        for index in 0..<count { subject.send(index) }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    let subject = Variant(name: "CurrentValueStreamSubject") { count in
        let subject = CurrentValueStreamSubject<Int, Never>(0)
        let subscriptions = (0..<observers).map { _ in subject.stream.sink(receiveValue: onValue) }
        for index in 0..<count { subject.send(index) }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    let store = Variant(name: "Store.write, observed with changes(for:)") { count in
        let store = Store<Int, Int>(levels: [], fetch: LoaderFamily { _ in AnyLoader { throw BenchmarkError() } })
        store.write(0, for: 1)
        let subscriptions = (0..<observers).map { _ in
            store.changes(for: 1).sink { response in onValue(response.value ?? 0) }
        }
        for index in 0..<count { store.write(index, for: 1) }
        for subscription in subscriptions { subscription.cancel() }
        return checksum()
    }
    return Scenario(
        title: "16. Store observation: one write to a key observed 100 times",
        unit: "writes", operations: writes, reference: "OpenCombine CurrentValueSubject",
        variants: [openCombine, subject, store],
        targets: [
            .instructions(
                "Store.write, observed with changes(for:)", atMost: 1, of: "OpenCombine CurrentValueSubject",
                label: "store observation, one write to 100 observers, instructions vs CurrentValueSubject")
        ],
        expectedChecksum: { count in count &* (count &- 1) / 2 })
}
