import XCTest

@testable import Loading

/// The queues behind a shared load's callers, a store fetch's callers (``OrderedQueue``, the first inline) and a key's
/// waiting changes (``SlotQueue``, none inline): order kept through removals by id, gaps closed up, and an element put
/// back in front. Each test runs on both.
final class OrderedQueueTests: XCTestCase {
    func test_elementsComeOffInTheOrderTheyWereAdded_withTheirIds() {
        elementsComeOffInOrder(OrderedQueue<String>())
        elementsComeOffInOrder(SlotQueue<String>())
    }

    private func elementsComeOffInOrder<Queue: TestedQueue<String>>(_ empty: Queue) {
        var queue = empty
        for (id, name) in ["a", "b", "c"].enumerated() { queue.append(name, id: id) }

        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.first?.element, "a")
        XCTAssertEqual(popAll(&queue).map(\.element), ["a", "b", "c"])
        XCTAssertEqual(popAll(&queue).map(\.id), [])
        XCTAssertTrue(queue.isEmpty)
    }

    func test_removingByIdTakesThatElementAlone_whereverItIs() {
        removingById(OrderedQueue<Int>())
        removingById(SlotQueue<Int>())
    }

    private func removingById<Queue: TestedQueue<Int>>(_ empty: Queue) {
        var queue = empty
        for id in 0..<10 { queue.append(id * 10, id: id) }

        XCTAssertEqual(queue.remove(id: 0), 0, "the first (inline, in an ordered queue)")
        XCTAssertEqual(queue.remove(id: 5), 50, "one in the middle")
        XCTAssertEqual(queue.remove(id: 9), 90, "the last")
        XCTAssertNil(queue.remove(id: 5), "removed already")
        XCTAssertNil(queue.remove(id: 42), "never added")

        XCTAssertEqual(queue.count, 7)
        XCTAssertEqual(queue.first?.id, 1)
        XCTAssertEqual(popAll(&queue).map(\.id), [1, 2, 3, 4, 6, 7, 8])
    }

    func test_manyRemovals_closeTheGapsUp_andKeepTheOrder() {
        manyRemovals(OrderedQueue<Int>())
        manyRemovals(SlotQueue<Int>())
    }

    private func manyRemovals<Queue: TestedQueue<Int>>(_ empty: Queue) {
        var queue = empty
        for id in 0..<10_000 { queue.append(id, id: id) }
        for id in stride(from: 1, to: 10_000, by: 2) { XCTAssertEqual(queue.remove(id: id), id) }
        for id in stride(from: 0, to: 5_000, by: 2) { XCTAssertEqual(queue.popFirst()?.id, id) }
        for id in [0, 2, 1_000, 4_998] { XCTAssertNil(queue.remove(id: id), "taken off already") }

        let left = popAll(&queue).map(\.id)
        XCTAssertEqual(left, Array(stride(from: 5_000, to: 10_000, by: 2)))
    }

    func test_anElementPutBackInFront_comesOffFirst_thenTheRestInOrder() {
        putBackInFront(OrderedQueue<String>())
        putBackInFront(SlotQueue<String>())
    }

    private func putBackInFront<Queue: TestedQueue<String>>(_ empty: Queue) {
        var queue = empty
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

        var slots = SlotQueue<Int>()
        for id in 0..<8 { slots.append(id, id: id) }
        XCTAssertEqual(slots.removeAll { _, element in element.isMultiple(of: 2) }, [0, 2, 4, 6])
        XCTAssertEqual(popAll(&slots).map(\.element), [1, 3, 5, 7])
    }

    func test_aQueueEmptied_takesNewElementsInOrder() {
        emptiedThenRefilled(OrderedQueue<Int>())
        emptiedThenRefilled(SlotQueue<Int>())
    }

    private func emptiedThenRefilled<Queue: TestedQueue<Int>>(_ empty: Queue) {
        var queue = empty
        for round in 0..<3 {
            for id in 0..<100 { queue.append(round * 1_000 + id, id: id) }
            XCTAssertEqual(popAll(&queue).map(\.element), (0..<100).map { round * 1_000 + $0 })
        }
    }

    func test_anEmptiedSlotQueue_givesItsStorageToAnother_whichTakesIt() {
        var spare: SlotQueue<Int>.Storage = []
        var first = SlotQueue<Int>()
        first.takeStorage(from: &spare)
        first.append(1, id: 1)
        first.giveStorage(to: &spare)
        XCTAssertEqual(spare.capacity, 0, "not while it holds an element")

        _ = first.popFirst()
        first.giveStorage(to: &spare)
        XCTAssertGreaterThan(spare.capacity, 0, "emptied: its storage goes to the spare")
        XCTAssertTrue(spare.isEmpty)

        var next = SlotQueue<Int>()
        next.takeStorage(from: &spare)
        XCTAssertEqual(spare.capacity, 0, "taken")
        next.append(2, id: 2)
        next.append(3, id: 3)
        XCTAssertEqual(popAll(&next).map(\.element), [2, 3])
        first.append(4, id: 4)
        XCTAssertEqual(popAll(&first).map(\.element), [4], "the queue that gave its storage away makes more")
    }

    private func popAll<Queue: TestedQueue>(_ queue: inout Queue) -> [(id: Int, element: Queue.Element)] {
        var taken: [(id: Int, element: Queue.Element)] = []
        while let next = queue.popFirst() { taken.append(next) }
        return taken
    }
}

/// What the tests ask of both queues.
protocol TestedQueue<Element> {
    associatedtype Element
    var count: Int { get }
    var isEmpty: Bool { get }
    var first: (id: Int, element: Element)? { get }
    mutating func append(_ element: Element, id: Int)
    mutating func prepend(_ element: Element, id: Int)
    mutating func popFirst() -> (id: Int, element: Element)?
    mutating func remove(id: Int) -> Element?
}

extension OrderedQueue: TestedQueue {}
extension SlotQueue: TestedQueue {}
