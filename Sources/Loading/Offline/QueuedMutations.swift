/// The mutations by id, in queue order: looking one up, adding one and taking the first out cost O(1).
struct QueuedMutations: Sendable {
    typealias Entry = MutationLedger.Entry

    private var byID: [String: Entry] = [:]
    private var order: [String] = []
    private var head = 0

    var isEmpty: Bool { byID.isEmpty }

    subscript(id: String) -> Entry? {
        byID[id]
    }

    /// Changes mutation `id` in place; `false` when it is not there.
    @discardableResult
    mutating func update(_ id: String, _ change: (inout Entry) -> Void) -> Bool {
        guard byID.index(forKey: id) != nil else { return false }  // asked by key: the entry is not copied
        change(&byID[id]!)
        return true
    }

    mutating func append(_ entry: consuming Entry) {
        let id = entry.record.id
        byID[id] = entry
        order.append(id)
    }

    /// The id of the oldest mutation left.
    mutating func firstID() -> String? {
        while head < order.count, byID.index(forKey: order[head]) == nil { head += 1 }
        if head > 64, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        return head < order.count ? order[head] : nil
    }

    /// Takes mutation `id` out; says whether it was the first.
    mutating func remove(_ id: String) -> (entry: Entry, wasFirst: Bool)? {
        let wasFirst = firstID() == id
        guard let entry = byID.removeValue(forKey: id) else { return nil }
        return (entry, wasFirst)
    }

    /// Takes every mutation out, in order.
    mutating func removeAll() -> [Entry] {
        defer { self = QueuedMutations() }
        return inOrder
    }

    var inOrder: [Entry] {
        order[head...].compactMap { byID[$0] }
    }
}
