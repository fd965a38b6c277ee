extension StoreMachine {
    /// A key's optimistic changes waiting for their commits, in the order they are shown, with what the key showed
    /// last: the value the first `count` changes gave, applied to the confirmed value. Showing one more change then
    /// runs one closure instead of all of them, and the head's acceptance (the confirmed value taking it in) keeps
    /// what is shown as it is: a queue of changes costs the same per change at any length.
    ///
    /// Changes are pure functions of the value (the store's contract), so a prefix applied once stays valid until the
    /// confirmed value changes otherwise (a fetch, a write) or the list changes other than at its end or its head.
    struct PendingChanges: Sendable {
        /// The changes from `head` on; taken ones are `nil` until the list is compacted.
        private var slots: [Mutation?] = []
        private var head = 0
        /// Counts the changes of the list a shown prefix cannot follow (an insertion before the end, a removal
        /// other than the head's acceptance).
        private(set) var epoch = 0
        /// What the key showed last, if it is still a prefix of the list.
        private var shown: ShownPrefix?
        init() {}
        var isEmpty: Bool { head == slots.count }
        var count: Int { slots.count - head }

        /// The changes in order.
        var all: [Mutation] { slots[head...].map { $0! } }

        /// Adds `mutation`: last, or before the changes of its queue with a greater sequence (a change made earlier
        /// by that queue, reaching the store later).
        mutating func insert(_ mutation: Mutation) {
            var position = slots.endIndex
            if let order = mutation.order {
                while position > head, let before = slots[position - 1]!.order, before.queue == order.queue,
                    before.sequence > order.sequence
                {
                    position -= 1
                }
            }
            if position != slots.endIndex { epoch += 1 }
            slots.insert(mutation, at: position)
        }

        /// The change `id`, if it is pending.
        func mutation(_ id: Int) -> Mutation? {
            slots[head...].first { $0!.id == id } ?? nil
        }

        /// Makes change `id` do `change` instead, in its place with its commit; what is shown starts over. Returns the
        /// change replaced, `nil` when `id` is not pending.
        mutating func replace(_ id: Int, with change: @escaping Change) -> Mutation? {
            guard let index = slots[head...].firstIndex(where: { $0!.id == id }), let old = slots[index] else {
                return nil
            }
            var mutation = Mutation(id: id, change: change, order: old.order)
            mutation.commit = old.commit
            slots[index] = mutation
            epoch += 1
            return old
        }

        /// Takes change `id` out. When it was the head and is `accepted` (the confirmed value takes it in, as version
        /// `confirmedVersion + 1`), what is shown stays a valid prefix; any other removal starts it over.
        mutating func remove(_ id: Int, accepted: Bool, confirmedVersion: Int) -> Mutation? {
            guard let index = slots[head...].firstIndex(where: { $0!.id == id }) else { return nil }
            guard index == head else {
                epoch += 1
                return slots.remove(at: index)
            }
            let mutation = slots[head].take()
            head += 1
            if accepted, let prefix = shown, prefix.epoch == epoch, prefix.confirmedVersion == confirmedVersion,
                prefix.count > 0
            {
                shown = ShownPrefix(
                    confirmedVersion: confirmedVersion + 1, epoch: epoch, count: prefix.count - 1, value: prefix.value)
            } else {
                epoch += 1
            }
            compact()
            return mutation
        }

        /// Forgets what the list remembers of the key it served (an entry made again for another key), keeping the
        /// storage of its (empty) list.
        mutating func forget() {
            slots.removeAll(keepingCapacity: true)
            head = 0
            epoch = 0
            shown = nil
        }

        /// Takes every change out.
        mutating func removeAll() -> [Mutation] {
            defer { self = PendingChanges() }
            return all
        }

        /// Drops the taken slots once they are the larger part of the list.
        mutating func compact() {
            if head == slots.count {
                slots.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 32, head * 2 > slots.count {
                slots.removeFirst(head)
                head = 0
            }
        }

        /// What showing the key starts from: the shown prefix that still holds for `confirmedVersion`, and the
        /// changes after it.
        func start(confirmedVersion: Int) -> (prefix: ShownPrefix?, rest: [Mutation]) {
            guard let prefix = shown, prefix.epoch == epoch, prefix.confirmedVersion == confirmedVersion,
                prefix.count <= count
            else { return (nil, all) }
            return (prefix, slots[(head + prefix.count)...].map { $0! })
        }

        /// Remembers what the key shows with its first `prefix.count` changes, when it is still a prefix of the list
        /// and longer than the one remembered.
        mutating func remember(_ prefix: ShownPrefix) {
            guard prefix.epoch == epoch, prefix.count <= count else { return }
            if let shown, shown.epoch == epoch, shown.confirmedVersion == prefix.confirmedVersion,
                shown.count >= prefix.count
            {
                return
            }
            shown = prefix
        }
    }

    /// The value the first `count` pending changes of a key gave, applied to its confirmed value at
    /// `confirmedVersion`, while its list was at `epoch`.
    struct ShownPrefix: Sendable {
        let confirmedVersion: Int
        let epoch: Int
        let count: Int
        let value: Value?
    }
}
