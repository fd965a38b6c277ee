import Foundation
import Loading

/// 22. The store's paths with many keys and pages, each beside what an app would write by hand, at a given size: a
/// hit of a default store (a memory level, the values it keeps) on a working set of 100 keys, a read of a key only
/// its memory level still holds, the first read of a key (fetched), a write to a key one observer watches,
/// `invalidate` of a key nobody observes, `invalidate` of an observed key with the refetch it starts, and a page
/// appended to a list of `pages` pages (no cap; and items with ids, capped at `pages`). Counted at two sizes, a cost
/// that grows with the keys or the pages shows as a figure that moves between them.
func storeSizeScenario(label: String, keys: Int, pages: Int, operations: Int) -> Scenario {
    precondition(keys % 100 == 0 && keys >= 100, "keys of every variant are read round-robin, 100 observed")
    // Every variant adds `index % 100` per operation (and nothing else) through the same opaque sink.
    let sum = Tally()
    let add: @Sendable (Int) -> Void = opaqueFunction { sum.value &+= $0 }
    func checksum() -> Int {
        defer { sum.value = 0 }
        return sum.value
    }
    let source: @Sendable (Int) -> Int = opaqueFunction { $0 % 100 }
    let fetch = LoaderFamily { (key: Int) in ImmediateLoader(result: .success(source(key))) }
    func defaultStore() -> Store<Int, Int> {
        let store = Store(levels: [.cache(MemoryCache<Int, Int>(countLimit: keys), name: "memory")], fetch: fetch)
        for key in 0..<keys { store.write(source(key), for: key) }
        return store
    }

    let lock = NSLock()
    let table = ResultBox<[Int: (value: Int, isStale: Bool)]>()
    func fillTable() {
        table.value = Dictionary(uniqueKeysWithValues: (0..<keys).map { ($0, (source($0), false)) })
    }
    let lookup = Variant(name: "locked Dictionary lookup") { count in
        fillTable()
        for index in 0..<count {
            lock.lock()
            let value = table.value![index % keys]!.value
            lock.unlock()
            add(value)
        }
        return checksum()
    }
    let hit = Variant(name: "Store.read hit, default store") { count in
        let store = defaultStore()
        // A screen's working set: 100 keys read again and again, whose values the store keeps.
        for index in 0..<count {
            _ = store.read(keys - 1 - index % 100).load { result in add((try? result.get())?.value ?? 0) }
        }
        return checksum()
    }
    let levelHit = Variant(name: "Store.read, a value only the memory level holds") { count in
        let store = defaultStore()
        // Every key in turn: each was let go long ago, so the store reads it from its level.
        for index in 0..<count {
            _ = store.read(index % keys).load { result in add((try? result.get())?.value ?? 0) }
        }
        return checksum()
    }
    let readThrough = Variant(name: "read-through into a locked Dictionary") { count in
        fillTable()
        for index in 0..<count {
            let key = keys + index  // never read before
            lock.lock()
            let cached = table.value![key]
            lock.unlock()
            let value = cached?.value ?? source(key)
            if cached == nil {
                lock.lock()
                table.value![key] = (value, false)
                lock.unlock()
            }
            add(value)
        }
        return checksum()
    }
    let firstRead = Variant(name: "Store.read, first read of a key") { count in
        let store = defaultStore()
        for index in 0..<count {
            _ = store.read(keys + index).load { result in add((try? result.get())?.value ?? 0) }
        }
        return checksum()
    }
    let writeByHand = Variant(name: "a value set in a locked Dictionary, one observer told") { count in
        fillTable()
        let observers: [Int: @Sendable (Int) -> Void] = Dictionary(
            uniqueKeysWithValues: (0..<100).map { key in (key, { @Sendable (value: Int) in add(value) }) })
        for index in 0..<count {
            lock.lock()
            table.value![index % 100] = (index % 100, false)
            let observer = observers[index % 100]
            lock.unlock()
            observer?(index % 100)
        }
        return checksum()
    }
    let write = Variant(name: "Store.write, observed key") { count in
        let store = defaultStore()
        let written = Tally()
        let observers = (0..<100).map { key in store.changes(for: key).sink { _ in written.value &+= 1 } }
        for index in 0..<count {
            store.write(index % 100, for: index % 100)
            add(index % 100)
        }
        for observer in observers { observer.cancel() }
        return checksum()
    }
    let markStale = Variant(name: "a stale flag set in a locked Dictionary") { count in
        fillTable()
        for index in 0..<count {
            lock.lock()
            table.value![index % keys]!.isStale = true
            lock.unlock()
            add(index % 100)
        }
        return checksum()
    }
    let invalidate = Variant(name: "Store.invalidate, unobserved key") { count in
        let store = defaultStore()
        for index in 0..<count {
            store.invalidate(index % keys)
            add(index % 100)
        }
        return checksum()
    }
    let deliveries = Tally()
    let refetchByHand = Variant(name: "stale flag, refetch and one observer, by hand") { count in
        fillTable()
        let observers: [Int: @Sendable (Int) -> Void] = Dictionary(
            uniqueKeysWithValues: (0..<100).map { key in (key, { @Sendable (_: Int) in deliveries.value &+= 1 }) })
        for index in 0..<count {
            let key = index % 100
            lock.lock()
            table.value![key]!.isStale = true
            lock.unlock()
            let fresh = source(key)
            lock.lock()
            table.value![key] = (fresh, false)
            let observer = observers[key]
            lock.unlock()
            observer?(fresh)
            add(index % 100)
        }
        return checksum()
    }
    let refetch = Variant(name: "Store.invalidate, observed key, with its refetch") { count in
        let store = defaultStore()
        let observers = (0..<100).map { key in store.changes(for: key).sink { _ in deliveries.value &+= 1 } }
        for index in 0..<count {
            store.invalidate(index % 100)
            add(index % 100)
        }
        for observer in observers { observer.cancel() }
        return checksum()
    }
    let pageSize = 20
    let page: @Sendable (Int) -> Page<Int, Int> = { number in
        Page(items: Array(number * pageSize..<(number + 1) * pageSize), nextCursor: number + 1)
    }
    let appendByHand = Variant(name: "a page appended to an array under a lock") { count in
        var list = (0..<pages).map(page)
        for index in 0..<count {
            let loaded = page(pages + index)
            lock.lock()
            list.append(loaded)
            lock.unlock()
            add(index % 100)
        }
        withExtendedLifetime(list) {}
        return checksum()
    }
    /// `count` pages appended to the list of `store`'s key 0, once it holds `pages` pages.
    func appendPages<Item>(to store: PagedStore<Int, Item, Int>, count: Int) -> Int {
        for _ in 0..<pages { _ = store.nextPage(of: 0).load { _ in } }
        for index in 0..<count {
            _ = store.nextPage(of: 0).load { _ in }
            add(index % 100)
        }
        return checksum()
    }
    let append = Variant(name: "PagedStore.loadNextPage, no cap") { count in
        let store = PagedStore(levels: [.cache(MemoryCache<Int, PagedList<Int, Int>>(), name: "memory")]) {
            (_: Int, cursor: Int?) in
            AnyLoader<Page<Int, Int>> { completion in
                completion(.success(page(cursor ?? 0)))
                return NoToken()
            }
        }
        return appendPages(to: store, count: count)
    }
    // Items with ids, which an append drops when the list shows them already, in a list capped at its pages: each
    // append drops the oldest page, and the ids the list shows change by a page's at each end.
    let identified: @Sendable (Int) -> Page<Numbered, Int> = { number in
        Page(items: (number * pageSize..<(number + 1) * pageSize).map(Numbered.init), nextCursor: number + 1)
    }
    let cappedAppend = Variant(name: "PagedStore.loadNextPage, items with ids, capped at the pages") { count in
        let store = PagedStore(
            levels: [.cache(MemoryCache<Int, PagedList<Numbered, Int>>(), name: "memory")], maxPages: pages
        ) { (_: Int, cursor: Int?) in
            AnyLoader<Page<Numbered, Int>> { completion in
                completion(.success(identified(cursor ?? 0)))
                return NoToken()
            }
        }
        return appendPages(to: store, count: count)
    }
    return Scenario(
        title: "22\(label). Store paths with \(keys) keys and \(pages) pages",
        unit: "operations", operations: operations, reference: "locked Dictionary lookup",
        variants: [
            lookup, hit, levelHit, readThrough, firstRead, writeByHand, write, markStale, invalidate, refetchByHand,
            refetch, appendByHand, append, cappedAppend,
        ],
        expectedChecksum: { count in (0..<count).reduce(0) { $0 &+ $1 % 100 } },
        note: "each store variant beside its hand-written equivalent above it; sources answer at once")
}

/// An item with an id, as a feed's posts are.
struct Numbered: Identifiable, Equatable, Sendable {
    let id: Int
}
