extension StoreMachine {
    /// A key's optimistic changes waiting for their commits, in the order they are shown, with what the key showed
    /// last: the value the first `count` changes gave, applied to the confirmed value. Showing one more change then
    /// runs one closure instead of all of them, and the head's acceptance (the confirmed value taking it in) keeps
    /// what is shown as it is: a queue of changes costs the same per change at any length.
    ///
    /// Changes are pure functions of the value (the store's contract), so a prefix applied once stays valid until the
    /// confirmed value changes otherwise (a fetch, a write) or the list changes other than at its end or its head,
    /// unless a queue rewrote its changes and says how the value shown is rewritten alike (``ShownPrefix/rewrites``).
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
        /// Whether what the key showed with its changes is remembered (a value of the caller's, and the changes'
        /// rewrites: released only after unlocking), which outlives the changes once they are settled.
        var remembersShown: Bool { shown != nil }
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

        /// Makes each change `replacement` names do the change given instead, in its place with its commit (those
        /// settled meanwhile are left out); returns the changes replaced. What is shown stays a prefix when the
        /// replacement rewrites it and it holds no change shown since the replacement's `shownUpTo`
        /// (see ``Replacement``); otherwise it starts over.
        mutating func replace(_ replacement: Replacement) -> [Mutation] {
            var replaced: [Mutation] = []
            for (id, change) in replacement.changes {
                guard let index = slots[head...].firstIndex(where: { $0!.id == id }), let old = slots[index] else {
                    continue
                }
                var mutation = Mutation(id: id, change: change, order: old.order)
                mutation.commit = old.commit
                slots[index] = mutation
                replaced.append(old)
            }
            guard !replaced.isEmpty else { return replaced }
            // A new epoch either way: a publisher that began before computed what the old changes show.
            let kept = shown.flatMap { prefix in prefix.epoch == epoch ? prefix : nil }
            epoch += 1
            shown = nil
            if let rewrite = replacement.rewritingShown, let kept, kept.newest <= replacement.shownUpTo,
                kept.rewrites.count < max(kept.count, 4)
            {
                shown = ShownPrefix(
                    confirmedVersion: kept.confirmedVersion, epoch: epoch, count: kept.count, newest: kept.newest,
                    value: kept.value, rewrites: kept.rewrites + [rewrite])
            }
            return replaced
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
                    confirmedVersion: confirmedVersion + 1, epoch: epoch, count: prefix.count - 1,
                    newest: prefix.newest, value: prefix.value, rewrites: prefix.rewrites)
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
                shown.count >= prefix.count, shown.rewrites.isEmpty
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
        /// The greatest id of the changes applied (ids are numbered in the order changes are made); `0` for none.
        let newest: Int
        let value: Value?
        /// Changes of the shown value itself, applied in order to `value` (outside the lock, by the publisher that
        /// starts from it): a queue's id rewrite of changes within the prefix, which turns what the old changes
        /// showed into what the new ones show without applying them again. It holds only while every change applied
        /// was made before the server's id was known (one made since names it already, and the rewrite would not
        /// turn what it showed into what it shows): hence ``newest``.
        var rewrites: [Change] = []

        /// What the first `count` changes show.
        func shown() -> Value? {
            rewrites.reduce(value) { value, rewrite in rewrite(value) }
        }
    }
}
