/// Where a store's value holds its entities (the friends of a list, the profile of a detail screen), and how to put
/// newer copies of them in: what ``SharedEntities/held(in:)`` needs to keep a store's keys in step with the others.
///
/// ```swift
/// let inPages: EntityPath<PagedList<Friend, Int>, Friend> = .items()
/// let inProfile = EntityPath<ProfileScreen, Friend>(
///     entities: { screen in [screen.friend] },
///     replacing: { screen, newer in newer(screen.friend).map { ProfileScreen(friend: $0, posts: screen.posts) } })
/// ```
public struct EntityPath<Value, Entity>: Sendable {
    let entities: @Sendable (Value) -> [Entity]
    let replacing: @Sendable (Value, (Entity) -> Entity?) -> Value?

    /// A path made of two functions: `entities` lists the entities `value` holds; `replacing` returns `value` with
    /// each entity for which `newer` gives a copy replaced by that copy, or `nil` when it gives none.
    public init(
        entities: @escaping @Sendable (Value) -> [Entity],
        replacing: @escaping @Sendable (_ value: Value, _ newer: (Entity) -> Entity?) -> Value?
    ) {
        self.entities = entities
        self.replacing = replacing
    }
}

extension EntityPath where Value == Entity {
    /// The value is the entity itself (a detail screen's friend).
    @inlinable  // so that its closures are compiled for the app's types: they run for each key an edit reaches
    public static var whole: EntityPath {
        EntityPath(entities: { [$0] }, replacing: { entity, newer in newer(entity) })
    }
}

extension EntityPath where Value == [Entity] {
    /// The entities are the elements of the value (a list of friends).
    @inlinable  // as `whole` is
    public static var elements: EntityPath {
        EntityPath(entities: { $0 }, replacing: { list, newer in list.replacingElements(with: newer) })
    }
}

extension EntityPath {
    /// The entities are the items of the value's pages (a ``PagedStore``'s list).
    public static func items<Cursor>() -> EntityPath where Value == PagedList<Entity, Cursor> {
        EntityPath(
            entities: { $0.items },
            replacing: { list, newer in
                var replaced = false
                let updated = list.updatingEveryPage { items in
                    guard let changed = items.replacingElements(with: newer) else { return }
                    items = changed
                    replaced = true
                }
                return replaced ? updated : nil
            })
    }
}

extension Array {
    /// The array with each element for which `newer` gives a copy replaced by it; `nil` when it gives none.
    @inlinable
    func replacingElements(with newer: (Element) -> Element?) -> [Element]? {
        var result: [Element]?
        for index in indices {
            guard let copy = newer(self[index]) else { continue }
            if result == nil { result = self }
            result![index] = copy
        }
        return result
    }
}
