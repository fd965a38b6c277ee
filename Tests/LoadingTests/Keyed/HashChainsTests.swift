import XCTest

@testable import Loading

/// The chains the store's keys and the shared entities find their slots by, against a plain model (which slots are
/// linked, with which hash value) over random histories: few hash values, so that chains are long, and enough slots
/// that the buckets grow several times.
final class HashChainsTests: XCTestCase {
    func test_everyLinkedSlot_isFoundByItsHashValue_andNoOtherIs_overRandomHistories() {
        for seed in 0..<200 {
            var random = SeededRandom(seed: UInt64(seed))
            var chains = HashChains()
            var model: [Int: Int] = [:]  // linked slot: its hash value
            for step in 0..<300 {
                let slots = chains.slotCount
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<4:
                    let slot = chains.addSlot()
                    let hash = Int.random(in: -6..<6, using: &random)
                    chains.link(slot, hash: hash)
                    model[slot] = hash
                case 4..<6 where !model.isEmpty:
                    let slot = model.keys.sorted()[Int.random(in: 0..<model.count, using: &random)]
                    chains.unlink(slot)
                    model[slot] = nil
                case 6..<8 where slots > 0 && model.count < slots:
                    let free = (0..<slots).first { model[$0] == nil }!
                    let hash = Int.random(in: -6..<6, using: &random)
                    chains.link(free, hash: hash)
                    model[free] = hash
                case 8 where slots > 0 && model[slots - 1] == nil:
                    chains.removeLastSlot()
                default:
                    continue
                }
                for slot in 0..<chains.slotCount {
                    let found = model[slot].flatMap { hash in chains.slot(hash: hash) { $0 == slot } }
                    XCTAssertEqual(found, model[slot] == nil ? nil : slot, "seed \(seed), step \(step), slot \(slot)")
                }
                for hash in -6..<6 {
                    XCTAssertNil(chains.slot(hash: hash) { model[$0] != hash }, "seed \(seed), step \(step)")
                }
            }
        }
    }
}
