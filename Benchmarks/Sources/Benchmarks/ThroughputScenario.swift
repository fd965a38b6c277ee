import Dispatch
import Loading
import OpenCombine

/// Scenario 1: values through subject -> map -> handleEvents(output) -> sink.
func throughputScenario(values: Int) -> Scenario {
    let transform: @Sendable (Int) -> Int = opaqueFunction { $0 &+ 1 }
    let counter = Tally()
    let sum = Tally()
    let onOutput: @Sendable (Int) -> Void = opaqueFunction { _ in counter.value &+= 1 }
    let onValue: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    @Sendable func checksum() -> Int {
        defer {
            counter.value = 0
            sum.value = 0
        }
        return sum.value &+ counter.value
    }

    let plain = Variant(name: "plain loop") { count in
        for index in 0..<count {
            let value = transform(index)
            onOutput(value)
            onValue(value)
        }
        return checksum()
    }
    let stream = Variant(name: "EventStream (StreamSubject)") { count in
        let subject = StreamSubject<Int, Never>()
        let subscription = subject.stream.map(transform).handleEvents(receiveOutput: onOutput).sink(
            receiveValue: onValue)
        for index in 0..<count { subject.send(index) }
        subscription.cancel()
        return checksum()
    }
    let openCombine = Variant(name: "OpenCombine (PassthroughSubject)") { count in
        let subject = OpenCombine.PassthroughSubject<Int, Never>()
        let subscription = subject.map(transform).handleEvents(receiveOutput: onOutput).sink(receiveValue: onValue)
        for index in 0..<count { subject.send(index) }
        subscription.cancel()
        return checksum()
    }
    let asyncStream = Variant(name: "AsyncStream + for await") { count in
        blocking {
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .unbounded)
            let consumer = Task {
                for await element in stream {
                    let value = transform(element)
                    onOutput(value)
                    onValue(value)
                }
            }
            for index in 0..<count { continuation.yield(index) }
            continuation.finish()
            await consumer.value
            return checksum()
        }
    }
    return Scenario(
        title: "1. Per-value throughput: subject -> map -> handleEvents -> sink",
        unit: "values", operations: values, reference: "plain loop",
        variants: [plain, stream, openCombine, asyncStream],
        expectedChecksum: { count in count &* (count &+ 1) / 2 &+ count })
}
