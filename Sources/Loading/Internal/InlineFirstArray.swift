/// An ordered list that keeps its first element inline and the others in an array: a list of one, which is what a
/// fetch's callers and a key's level operations taken for issuing usually are, allocates nothing.
///
/// Kept in a value whose destruction is specialized (an array's element, say). A field of a generic class's instance
/// is destroyed by the class's unspecialized deinitializer, which looks this type's metadata up each time.
struct InlineFirstArray<Element> {
    /// The first element; `nil` only when the list is empty.
    var head: Element?
    /// The elements after the first.
    var tail: [Element] = []

    init() {}

    /// A list of `element` alone.
    init(_ element: Element) {
        head = element
    }

    /// A list of `head` alone, or an empty one.
    init(head: Element?) {
        self.head = head
    }

    /// A list of `elements`, in their order; the array's storage becomes the list's.
    init(_ elements: consuming [Element]) {
        guard !elements.isEmpty else { return }
        head = elements.removeFirst()
        tail = elements
    }

    mutating func append(_ element: Element) {
        if head == nil { head = element } else { tail.append(element) }
    }

    /// The list of `transform` applied to each element, in order (a list of one allocates nothing).
    func mapInline<Mapped>(_ transform: (Element) throws -> Mapped) rethrows -> InlineFirstArray<Mapped> {
        var mapped = InlineFirstArray<Mapped>()
        mapped.head = try head.map(transform)
        mapped.tail = try tail.map(transform)
        return mapped
    }

    /// Removes and returns the element at `index`; the element after it, if any, takes its place.
    @discardableResult
    mutating func remove(at index: Int) -> Element {
        guard index == 0 else { return tail.remove(at: index - 1) }
        defer { head = tail.isEmpty ? nil : tail.removeFirst() }
        return head!
    }
}

extension InlineFirstArray: RandomAccessCollection {
    var startIndex: Int { 0 }

    var endIndex: Int { head == nil ? 0 : tail.count + 1 }

    var isEmpty: Bool { head == nil }

    subscript(position: Int) -> Element {
        position == 0 ? head! : tail[position - 1]
    }
}

extension InlineFirstArray: Sendable where Element: Sendable {}
