import XCTest

@testable import Loading

/// The queue behind a shared load's callers, a store fetch's callers and a key's waiting changes: order kept through
/// removals by id, gaps closed up, and an element put back in front.
final class OrderedQueueTests: XCTestCase {
    func test_elementsComeOffInTheOrderTheyWereAdded_withTheirIds() {
        var queue = OrderedQueue<String>()
        for (id, name) in ["a", "b", "c"].enumerated() { queue.append(name, id: id) }

        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.first?.element, "a")
        XCTAssertEqual(popAll(&queue).map(\.element), ["a", "b", "c"])
        XCTAssertEqual(popAll(&queue).map(\.id), [])
        XCTAssertTrue(queue.isEmpty)
    }

    func test_removingByIdTakesThatElementAlone_whereverItIs() {
        var queue = OrderedQueue<Int>()
        for id in 0..<10 { queue.append(id * 10, id: id) }

        XCTAssertEqual(queue.remove(id: 0), 0, "the first, kept inline")
        XCTAssertEqual(queue.remove(id: 5), 50, "one in the middle")
        XCTAssertEqual(queue.remove(id: 9), 90, "the last")
        XCTAssertNil(queue.remove(id: 5), "removed already")
        XCTAssertNil(queue.remove(id: 42), "never added")

        XCTAssertEqual(queue.count, 7)
        XCTAssertEqual(queue.first?.id, 1)
        XCTAssertEqual(popAll(&queue).map(\.id), [1, 2, 3, 4, 6, 7, 8])
    }

    func test_manyRemovals_closeTheGapsUp_andKeepTheOrder() {
        var queue = OrderedQueue<Int>()
        for id in 0..<10_000 { queue.append(id, id: id) }
        for id in stride(from: 1, to: 10_000, by: 2) { XCTAssertEqual(queue.remove(id: id), id) }
        for id in stride(from: 0, to: 5_000, by: 2) { XCTAssertEqual(queue.popFirst()?.id, id) }
        for id in [0, 2, 1_000, 4_998] { XCTAssertNil(queue.remove(id: id), "taken off already") }

        let left = popAll(&queue).map(\.id)
        XCTAssertEqual(left, Array(stride(from: 5_000, to: 10_000, by: 2)))
    }

    func test_anElementPutBackInFront_comesOffFirst_thenTheRestInOrder() {
        var queue = OrderedQueue<String>()
        queue.append("a", id: 1)
        queue.append("b", id: 2)
        let taken = queue.popFirst()
        XCTAssertEqual(taken?.element, "a")

        queue.prepend("a", id: 1)
        queue.prepend("z", id: 0)

        XCTAssertEqual(popAll(&queue).map(\.element), ["z", "a", "b"])
    }

    func test_removeAllWhere_takesThePickedOnes_inOrder_andKeepsTheOthers() {
        var queue = OrderedQueue<Int>()
        for id in 0..<8 { queue.append(id, id: id) }

        let removed = queue.removeAll { _, element in element.isMultiple(of: 2) }

        XCTAssertEqual(removed, [0, 2, 4, 6])
        var kept: [Int] = []
        queue.forEachInOrder { _, element in kept.append(element) }
        XCTAssertEqual(kept, [1, 3, 5, 7])
        XCTAssertEqual(queue.map { $0 * 10 }, [10, 30, 50, 70])
        XCTAssertEqual(Array(queue.mapInline { $0 }), [1, 3, 5, 7])
    }

    func test_aQueueEmptied_takesNewElementsInOrder() {
        var queue = OrderedQueue<Int>()
        for round in 0..<3 {
            for id in 0..<100 { queue.append(round * 1_000 + id, id: id) }
            XCTAssertEqual(popAll(&queue).map(\.element), (0..<100).map { round * 1_000 + $0 })
        }
    }

    private func popAll<Element>(_ queue: inout OrderedQueue<Element>) -> [(id: Int, element: Element)] {
        var taken: [(id: Int, element: Element)] = []
        while let next = queue.popFirst() { taken.append(next) }
        return taken
    }
}
