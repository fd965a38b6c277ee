/// The mutations by id, in queue order: looking one up, adding one and taking the first out cost O(1). An id is
/// hashed once per look (to find the mutation's place); the queue's order is walked by place, without hashing.
struct QueuedMutations: Sendable {
    typealias Entry = MutationLedger.Entry

    /// Each mutation's place: its index in `entries`, plus `dropped`.
    private var places: [String: Int] = [:]
    /// The mutations in the order they were added; `nil` where one was taken out.
    private var entries: [Entry?] = []
    /// The id of each of `entries` (`nil` where it was taken out), looked at to walk the order: an entry is a large
    /// value, which looking at copies.
    private var ids: [String?] = []
    /// How many places were dropped from the front of `entries` (all of them taken out).
    private var dropped = 0
    /// The index in `entries` of the first mutation left, or of a place before it.
    private var head = 0

    var isEmpty: Bool { places.isEmpty }

    subscript(id: String) -> Entry? {
        places[id].flatMap { entries[$0 - dropped] }
    }

    /// Changes mutation `id` in place; `false` when it is not there.
    @discardableResult
    mutating func update(_ id: String, _ change: (inout Entry) -> Void) -> Bool {
        guard let place = places[id] else { return false }
        change(&entries[place - dropped]!)
        return true
    }

    mutating func append(_ entry: consuming Entry) {
        places[entry.record.id] = dropped + entries.count
        ids.append(entry.record.id)
        entries.append(entry)
    }

    /// The id of the oldest mutation left.
    mutating func firstID() -> String? {
        while head < ids.count, ids[head] == nil { head += 1 }
        if head > 64, head * 2 > ids.count {
            entries.removeFirst(head)
            ids.removeFirst(head)
            dropped += head
            head = 0
        }
        return head < ids.count ? ids[head] : nil
    }

    /// Changes the oldest mutation left in place, and returns its id; `nil` when there is none.
    mutating func updateFirst(_ change: (inout Entry) -> Void) -> String? {
        guard let id = firstID() else { return nil }
        change(&entries[head]!)
        return id
    }

    /// Takes mutation `id` out; says whether it was the first.
    mutating func remove(_ id: String) -> (entry: Entry, wasFirst: Bool)? {
        let wasFirst = firstID() == id
        guard let place = places.removeValue(forKey: id), let entry = entries[place - dropped].take() else {
            return nil
        }
        ids[place - dropped] = nil
        return (entry, wasFirst)
    }

    /// Takes every mutation out, in order.
    mutating func removeAll() -> [Entry] {
        defer { self = QueuedMutations() }
        return inOrder
    }

    var inOrder: [Entry] {
        entries[head...].compactMap { $0 }
    }
}
