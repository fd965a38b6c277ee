/// One page of a list, as a page source returns it: its items, the cursor of the page after it (`nil` on the last
/// page) and, for a list that also grows backward, the cursor of the page before it (`nil` on the first page).
///
/// A cursor is whatever the source pages by: an opaque token, an id to start after, or an offset:
/// ```swift
/// let page = Page(items: friends, nextCursor: friends.count < 20 ? nil : offset + friends.count)
/// ```
/// A page's cursors point both ways whichever way it was loaded: a page loaded as the previous page of another still
/// gives the cursor of the page after it.
public struct Page<Item: Sendable, Cursor: Sendable>: Sendable {
    /// The page's items, in order.
    public var items: [Item]
    /// The cursor that loads the next page; `nil` when this page is the last.
    public var nextCursor: Cursor?
    /// The cursor that loads the page before this one; `nil` when this page is the first (or the source pages one
    /// way only).
    public var previousCursor: Cursor?

    /// Creates a page.
    public init(items: [Item], nextCursor: Cursor?, previousCursor: Cursor? = nil) {
        self.items = items
        self.nextCursor = nextCursor
        self.previousCursor = previousCursor
    }
}

extension Page: Equatable where Item: Equatable, Cursor: Equatable {}
extension Page: Codable where Item: Codable, Cursor: Codable {}
