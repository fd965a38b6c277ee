/// Slots (the numbers a table gives what it keeps, `0..<slotCount`) found by the hash value of what they hold, for a
/// table that is not generic: a key is hashed once, by its own type, never again by a dictionary, and recognized by
/// the table's own comparison. The linked slots of one bucket (the low bits of a hash value, which Swift's hashing
/// spreads well) are chained; there are at least twice as many buckets as linked slots.
struct HashChains: Sendable {
    /// The first slot of each bucket (-1: none).
    private var buckets = [Int](repeating: -1, count: 8)
    /// The slot after each one in its bucket (-1: none; `unlinked` for a slot that is in no bucket).
    private var next: [Int] = []
    private var hashes: [Int] = []
    private var linked = 0

    private static let unlinked = -2

    init() {}

    /// The number of slots, linked or not.
    var slotCount: Int { next.count }

    /// The hash value `slot` was linked with.
    func hash(of slot: Int) -> Int {
        hashes[slot]
    }

    /// The linked slot with `hash` that `isMatch` recognizes, if there is one.
    func slot(hash: Int, where isMatch: (Int) -> Bool) -> Int? {
        var slot = buckets[hash & (buckets.count - 1)]
        while slot >= 0 {
            if hashes[slot] == hash, isMatch(slot) { return slot }
            slot = next[slot]
        }
        return nil
    }

    /// Adds a slot, the next one (`slotCount`), in no bucket yet.
    mutating func addSlot() -> Int {
        next.append(Self.unlinked)
        hashes.append(0)
        return next.count - 1
    }

    /// Removes the last slot, which is in no bucket.
    mutating func removeLastSlot() {
        precondition(next.last == Self.unlinked, "Only a slot in no bucket is removed")
        next.removeLast()
        hashes.removeLast()
    }

    /// Puts `slot`, in no bucket, in the bucket of `hash`.
    mutating func link(_ slot: Int, hash: Int) {
        if linked + 1 > buckets.count / 2 { rehash(into: buckets.count * 2) }
        hashes[slot] = hash
        place(slot)
        linked += 1
    }

    /// Takes `slot` out of its bucket.
    mutating func unlink(_ slot: Int) {
        let bucket = hashes[slot] & (buckets.count - 1)
        if buckets[bucket] == slot {
            buckets[bucket] = next[slot]
        } else {
            var previous = buckets[bucket]
            while next[previous] != slot { previous = next[previous] }
            next[previous] = next[slot]
        }
        next[slot] = Self.unlinked
        linked -= 1
    }

    /// Forgets every slot.
    mutating func removeAll() {
        self = HashChains()
    }

    private mutating func place(_ slot: Int) {
        let bucket = hashes[slot] & (buckets.count - 1)
        next[slot] = buckets[bucket]
        buckets[bucket] = slot
    }

    /// Places every linked slot in `count` buckets (a slot's `next` is rewritten only as it is placed, so the slots
    /// after it still say whether they were linked).
    private mutating func rehash(into count: Int) {
        buckets = [Int](repeating: -1, count: count)
        for slot in next.indices where next[slot] != Self.unlinked { place(slot) }
    }
}
