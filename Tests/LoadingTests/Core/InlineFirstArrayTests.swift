import XCTest

@testable import Loading

final class InlineFirstArrayTests: XCTestCase {
    func test_appendsAndRemovals_keepTheOrderOfAnArray_overManyOperations() {
        var list = InlineFirstArray<Int>()
        var reference: [Int] = []
        var random = SystemRandomNumberGenerator()
        for step in 0..<2_000 {
            if reference.isEmpty || Int.random(in: 0..<3, using: &random) > 0 {
                list.append(step)
                reference.append(step)
            } else {
                let index = Int.random(in: 0..<reference.count, using: &random)
                XCTAssertEqual(list.remove(at: index), reference.remove(at: index))
            }
            XCTAssertEqual(Array(list), reference)
            XCTAssertEqual(list.isEmpty, reference.isEmpty)
        }
    }

    func test_aListMadeFromAnArray_hasItsElementsInOrder() {
        XCTAssertEqual(Array(InlineFirstArray<Int>([1, 2, 3])), [1, 2, 3])
        XCTAssertEqual(Array(InlineFirstArray<Int>([7])), [7])
        XCTAssertTrue(InlineFirstArray<Int>([Int]()).isEmpty)
        XCTAssertEqual(Array(InlineFirstArray<Int>([1, 2, 3]).mapInline { $0 * 10 }), [10, 20, 30])
        XCTAssertTrue(InlineFirstArray<Int>().mapInline { $0 * 10 }.isEmpty)
    }

    func test_removingTheFirst_movesTheNextIntoItsPlace() {
        var list = InlineFirstArray<Int>([1, 2, 3])
        XCTAssertEqual(list.remove(at: 0), 1)
        XCTAssertEqual(list.head, 2, "the next element takes the first's place")
        list.remove(at: 0)
        list.remove(at: 0)
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
    }
}
