import XCTest

@testable import Loading

/// The entity table alone, against a plain model (dictionaries of what each key holds): freed slots are filled with
/// the last one, so every copy, version and holder must still be found by its id after any history of notes.
final class EntityTableTests: XCTestCase {
    private struct Item: Identifiable, Equatable, Sendable {
        let id: Int
        var version: Int
    }

    /// A key of store 1 (even numbers) or 2 (odd ones) whose object is made for it (compared by hash and type, as a
    /// store's key).
    private func key(_ number: Int) -> HeldKey {
        HeldKey(store: 1 + number % 2, object: StoreKey(number), hash: number.hashValue)
    }

    func test_randomHistories_keepEveryCopyAndHolder_asTheModelSays() {
        var generator = SeededRandom(seed: 61)
        for _ in 0..<200 {
            let kept = Int.random(in: 1...6, using: &generator)
            var table = EntityTable<Item>(keptKeys: kept)
            var holds: [Int: [Int]] = [:]  // key → ids, the model
            var order: [Int] = []  // keys, least recently confirmed first
            var copies: [Int: Item] = [:]
            for step in 0..<60 {
                let keyNumber = Int.random(in: 0..<8, using: &generator)
                var chosen = Set<Int>()
                for _ in 0..<Int.random(in: 0...4, using: &generator) {
                    chosen.insert(Int.random(in: 0..<12, using: &generator))
                }
                var ids = chosen.sorted()
                // A value may hold one entity in two places.
                if let repeated = ids.randomElement(using: &generator), Int.random(in: 0..<3, using: &generator) == 0 {
                    ids.insert(repeated, at: Int.random(in: 0...ids.count, using: &generator))
                }
                let value = ids.map { copies[$0] ?? Item(id: $0, version: step) }
                let previous = (holds[keyNumber] ?? []).map { copies[$0]! }
                // Judged whole, or only in the part that changed (the table judges a key it does not follow whole).
                var (start, end, previousEnd) = (0, value.count, previous.count)
                if Bool.random(using: &generator) {
                    while start < end, start < previousEnd, previous[start] == value[start] { start += 1 }
                    while end > start, previousEnd > start, previous[previousEnd - 1] == value[end - 1] {
                        end -= 1
                        previousEnd -= 1
                    }
                }
                var known: [Item] = []
                let confirming = table.confirm(
                    key(keyNumber), value, changed: start..<end, replaced: start..<previousEnd, of: previous,
                    whole: start == 0 && end == value.count, known: &known)
                // The copies known are compared; the others were taken at once.
                XCTAssertEqual(known.count, confirming.compared.count)
                for (position, index) in confirming.compared.enumerated() {
                    // (An entity new to the table in two places: the second is compared with the first's copy.)
                    XCTAssertEqual(known[position], copies[value[index].id] ?? value[index])
                    XCTAssertEqual(confirming.versions[position], table.version(of: value[index].id))
                }
                for item in value where copies[item.id] == nil { copies[item.id] = item }
                order.removeAll { $0 == keyNumber }
                if ids.isEmpty {
                    holds[keyNumber] = nil
                } else {
                    holds[keyNumber] = ids
                    order.append(keyNumber)
                }
                while order.count > kept { holds[order.removeFirst()] = nil }
                let held = Set(holds.values.joined())
                copies = copies.filter { held.contains($0.key) }
                // A newer copy of one entity held, taken at the version known.
                if let id = held.randomElement(using: &generator), let version = table.version(of: id) {
                    let newer = Item(id: id, version: 1_000 + step)
                    if Bool.random(using: &generator) {
                        XCTAssertTrue(table.take([newer], versions: [version]).took)
                        XCTAssertFalse(table.take([newer], versions: [version]).took, "a copy taken at a stale version")
                    } else {
                        let taken = table.take(newer, version: version)
                        XCTAssertEqual(taken?.released as? Item, copies[id])
                        XCTAssertEqual(taken.map { Set($0.holders) }, table.holders(of: id))
                        XCTAssertEqual(taken?.since, table.version(of: id))
                        XCTAssertNil(table.take(newer, version: version), "a copy taken at a stale version")
                    }
                    copies[id] = newer
                }
                for id in 0..<12 {
                    XCTAssertEqual(table.copy(of: id), copies[id], "entity \(id) after step \(step)")
                    let holders = Set(holds.filter { $0.value.contains(id) }.keys)
                    XCTAssertEqual(table.holders(of: id), Set(holders.map(key)), "holders of \(id) after \(step)")
                }
                XCTAssertEqual(table.keyCount, holds.count)
                if Int.random(in: 0..<10, using: &generator) == 0 {
                    _ = table.forget(store: 2)
                    holds = holds.filter { $0.key % 2 == 0 }
                    order.removeAll { $0 % 2 == 1 }
                    let held = Set(holds.values.joined())
                    copies = copies.filter { held.contains($0.key) }
                }
            }
            _ = table.forget(store: 2)
            _ = table.forget(store: 1)
            XCTAssertEqual(table.keyCount, 0)
            for id in 0..<12 { XCTAssertNil(table.copy(of: id)) }
        }
    }

    func test_aKeyItsStoreMadeAgain_isFollowedByItsNewObject_andTheOldOneIsHandedBackToRelease() {
        var table = EntityTable<Item>(keptKeys: 4)
        var known: [Item] = []
        let first = key(0)
        _ = table.confirm(
            first, [Item(id: 7, version: 0)], changed: 0..<1, replaced: 0..<0, of: [], whole: true, known: &known)
        let again = key(0)  // the store let go of the key and made it again

        var released: [Any] = []
        XCTAssertTrue(table.touch(again, releasing: &released))

        XCTAssertEqual(released.count, 1, "the old object, to release after unlocking")
        XCTAssertTrue((released.first as? HeldKey)?.object === first.object)
        XCTAssertTrue(table.holders(of: 7).first?.object === again.object, "the key is followed by its new object")
        released = []
        XCTAssertTrue(table.touch(again, releasing: &released))
        XCTAssertTrue(released.isEmpty, "nothing more to let go of")
        XCTAssertEqual(table.keyCount, 1)
    }

    func test_aKeyConfirmedWithoutChange_isTouched_onlyWhenFollowed() {
        var table = EntityTable<Item>(keptKeys: 2)
        var known: [Item] = []
        var released: [Any] = []
        XCTAssertFalse(table.touch(key(0), releasing: &released), "a key not followed")
        for number in 0..<2 {
            _ = table.confirm(
                key(number), [Item(id: number, version: 0)], changed: 0..<1, replaced: 0..<0, of: [], whole: true,
                known: &known)
        }
        XCTAssertTrue(table.touch(key(0), releasing: &released))  // now the most recently confirmed: key 1 goes first
        _ = table.confirm(
            key(2), [Item(id: 2, version: 0)], changed: 0..<1, replaced: 0..<0, of: [], whole: true, known: &known)
        XCTAssertNotNil(table.copy(of: 0))
        XCTAssertNil(table.copy(of: 1), "the least recently confirmed key is let go of")
    }
}
