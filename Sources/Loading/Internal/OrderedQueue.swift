/// Elements in the order they were added, each with an id: the first taken off, one put back in front, or one
/// removed by its id (when ids grow in the order elements are added), each in time that does not grow with the count.
///
/// An element added to an empty queue is kept inline (a queue of one allocates nothing); the others sit in a
/// ``SlotQueue``.
struct OrderedQueue<Element> {
    /// The first element, when it was added to an empty queue (or put back in front).
    private var inline: (id: Int, element: Element)?
    /// The elements after it.
    private var rest = SlotQueue<Element>()

    init() {}

    /// A queue of `element` alone.
    init(_ element: Element, id: Int) {
        inline = (id, element)
    }

    /// The number of elements.
    var count: Int { rest.count + (inline == nil ? 0 : 1) }

    /// Whether the queue holds no element.
    var isEmpty: Bool { inline == nil && rest.isEmpty }

    /// The first element, with its id.
    var first: (id: Int, element: Element)? {
        inline ?? rest.first
    }

    /// Adds `element` last.
    mutating func append(_ element: Element, id: Int) {
        if isEmpty { inline = (id, element) } else { rest.append(element, id: id) }
    }

    /// Puts `element` first.
    mutating func prepend(_ element: Element, id: Int) {
        if let inline { rest.prepend(inline.element, id: inline.id) }
        inline = (id, element)
    }

    /// Takes the first element off.
    mutating func popFirst() -> (id: Int, element: Element)? {
        guard let inline else { return rest.popFirst() }
        self.inline = nil
        return inline
    }

    /// Removes the element with `id` (ids grow in the order elements were added).
    mutating func remove(id: Int) -> Element? {
        guard let inline, inline.id == id else { return rest.remove(id: id) }
        self.inline = nil
        return inline.element
    }

    /// Removes every element `removes` picks, in order, and returns them.
    mutating func removeAll(where removes: (_ id: Int, _ element: Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        if let inline, removes(inline.id, inline.element) {
            self.inline = nil
            removed.append(inline.element)
        }
        removed += rest.removeAll(where: removes)
        return removed
    }

    /// Calls `body` on each element, in order.
    func forEachInOrder(_ body: (_ id: Int, _ element: Element) -> Void) {
        if let inline { body(inline.id, inline.element) }
        rest.forEachInOrder(body)
    }

    /// `transform` applied to each element, in order.
    func map<Mapped>(_ transform: (Element) -> Mapped) -> [Mapped] {
        var mapped: [Mapped] = []
        mapped.reserveCapacity(count)
        forEachInOrder { _, element in mapped.append(transform(element)) }
        return mapped
    }

    /// ``map(_:)`` into a list that keeps its first element inline (a list of one allocates nothing).
    func mapInline<Mapped>(_ transform: (Element) -> Mapped) -> InlineFirstArray<Mapped> {
        var mapped = InlineFirstArray<Mapped>()
        forEachInOrder { _, element in mapped.append(transform(element)) }
        return mapped
    }
}

/// Elements in the order they were added, each with an id, as ``OrderedQueue`` keeps them but with none inline: an
/// empty queue is three words, for a part that is usually empty and kept in every entry (a key's waiting changes),
/// and its storage can go to another queue once it empties (``giveStorage(to:)``).
///
/// A removed element leaves a gap (its slot forgets it at once), closed up once the gaps outnumber the elements.
struct SlotQueue<Element> {
    /// What the queue keeps its elements in, which an empty queue may hand to another (``giveStorage(to:)``).
    typealias Storage = [(id: Int, element: Element?)]

    private var slots: Storage = []
    /// The slots before `start` are taken off; `slots[start]` holds an element whenever a slot does.
    private var start = 0
    /// The number of elements.
    private(set) var count = 0

    init() {}

    /// Whether the queue holds no element.
    var isEmpty: Bool { count == 0 }

    /// The first element, with its id.
    var first: (id: Int, element: Element)? {
        guard count > 0, let element = slots[start].element else { return nil }
        return (slots[start].id, element)
    }

    /// Adds `element` last.
    mutating func append(_ element: Element, id: Int) {
        slots.append((id, element))
        count += 1
    }

    /// Puts `element` first.
    mutating func prepend(_ element: Element, id: Int) {
        if start > 0 {
            start -= 1
            slots[start] = (id, element)
        } else {
            slots.insert((id, element), at: 0)
        }
        count += 1
    }

    /// Takes the first element off.
    mutating func popFirst() -> (id: Int, element: Element)? {
        guard count > 0, let element = slots[start].element else { return nil }
        let id = slots[start].id
        slots[start].element = nil
        count -= 1
        settle()
        return (id, element)
    }

    /// Removes the element with `id`, found by halving (ids grow in the order elements were added).
    mutating func remove(id: Int) -> Element? {
        var low = start
        var high = slots.count
        while low < high {
            let middle = low + (high - low) / 2
            if slots[middle].id < id { low = middle + 1 } else { high = middle }
        }
        guard low < slots.count, slots[low].id == id, let element = slots[low].element else { return nil }
        slots[low].element = nil
        count -= 1
        settle()
        return element
    }

    /// Removes every element `removes` picks, in order, and returns them.
    mutating func removeAll(where removes: (_ id: Int, _ element: Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        for index in start..<slots.count {
            guard let element = slots[index].element, removes(slots[index].id, element) else { continue }
            slots[index].element = nil
            removed.append(element)
        }
        count -= removed.count
        settle()
        return removed
    }

    /// Takes `spare`'s storage when the queue has none: storage an emptied queue gave back, so that this one makes
    /// none.
    mutating func takeStorage(from spare: inout Storage) {
        if slots.capacity == 0 { swap(&slots, &spare) }
    }

    /// Lets go of an empty queue's storage: to `spare` when that has none, else for good.
    mutating func giveStorage(to spare: inout Storage) {
        guard count == 0, slots.capacity > 0 else { return }
        if spare.capacity == 0 { swap(&slots, &spare) } else { slots = [] }
    }

    /// Calls `body` on each element, in order.
    func forEachInOrder(_ body: (_ id: Int, _ element: Element) -> Void) {
        for index in start..<slots.count {
            if let element = slots[index].element { body(slots[index].id, element) }
        }
    }

    /// Moves `start` to the first element; empties the slots once none holds an element (a large storage is let go
    /// of, so that a spike does not stay; a small one is kept, for the queue's next elements or another queue, see
    /// ``giveStorage(to:)``), or closes the gaps up once they outnumber the elements (each element moves once per as
    /// many gaps made since: constant work per removal on average).
    private mutating func settle() {
        guard count > 0 else {
            if slots.capacity > 64 { slots = [] } else { slots.removeAll(keepingCapacity: true) }
            start = 0
            return
        }
        while slots[start].element == nil { start += 1 }
        let gaps = slots.count - count
        if gaps > 16, gaps > count {
            slots = slots[start...].filter { $0.element != nil }
            start = 0
        }
    }
}

extension SlotQueue: Sendable where Element: Sendable {}
extension OrderedQueue: Sendable where Element: Sendable {}
