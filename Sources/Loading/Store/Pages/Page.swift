/// One page of a list, as a page source returns it: its items, and the cursor of the page after it (`nil` on the
/// last page).
///
/// A cursor is whatever the source pages by: an opaque token, an id to start after, or an offset:
/// ```swift
/// let page = Page(items: friends, nextCursor: friends.count < 20 ? nil : offset + friends.count)
/// ```
public struct Page<Item: Sendable, Cursor: Sendable>: Sendable {
    /// The page's items, in order.
    public var items: [Item]
    /// The cursor that loads the next page; `nil` when this page is the last.
    public var nextCursor: Cursor?

    /// Creates a page.
    public init(items: [Item], nextCursor: Cursor?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

extension Page: Equatable where Item: Equatable, Cursor: Equatable {}
extension Page: Codable where Item: Codable, Cursor: Codable {}
