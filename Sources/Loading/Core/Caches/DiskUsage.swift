/// What a size-limited ``DiskCache`` knows of its directory: each entry's size and when it was last used, and which
/// entry to let go of next. It keeps no file of its own: when each entry was last used is its file's modification
/// time, which the cache sets on every save and read, so a new cache over the directory (a relaunch, or after a
/// process was killed at any point) finds the order again by listing it.
///
/// Use stamps are whole microseconds since the reference date and only grow: each use is stamped with the clock, or
/// one microsecond after the last stamp when the clock reads earlier (it was set back), so a recent use never looks
/// older than one before it.
///
/// - Complexity: amortized O(1) per use, removal and eviction.
struct DiskUsage: Sendable {
    private struct Use: Sendable {
        var size: Int
        var stamp: Int64
    }

    private struct Record: Sendable {
        let name: String
        let stamp: Int64
    }

    private var uses: [String: Use] = [:]
    /// Every use, oldest first; a record whose stamp is no longer its entry's is stale, and skipped.
    private var order: [Record] = []
    private var head = 0
    private var lastStamp: Int64 = 0
    /// The bytes of every entry known and of ``unfinishedSize``.
    private(set) var totalSize = 0
    /// The bytes of temporary files left by saves that did not finish and not deleted yet: counted against the
    /// limit, never evicted (a live process may still be writing one).
    var unfinishedSize = 0 {
        didSet { totalSize += unfinishedSize - oldValue }
    }

    /// The usage of the entries found in the directory (each file's name, size and modification time), and of
    /// `unfinishedSize` bytes of temporary files.
    init(found entries: [(name: String, size: Int, stamp: Int64)], unfinishedSize: Int = 0) {
        self.unfinishedSize = unfinishedSize
        totalSize = unfinishedSize
        for entry in entries.sorted(by: { $0.stamp < $1.stamp }) {
            record(entry.name, size: entry.size, stamp: entry.stamp)
        }
    }

    /// The stamp a use at `now` (microseconds since the reference date) takes.
    func nextStamp(now: Int64) -> Int64 {
        max(now, lastStamp + 1)
    }

    /// Records a use of the entry `name` (a save or a read) with its size, stamped `stamp` (see
    /// ``nextStamp(now:)``).
    mutating func use(_ name: String, size: Int, stamp: Int64) {
        record(name, size: size, stamp: stamp)
        compact()
    }

    /// Forgets the entry `name` (removed, or found missing).
    mutating func remove(_ name: String) {
        guard let use = uses.removeValue(forKey: name) else { return }
        totalSize -= use.size
    }

    /// Forgets every entry.
    mutating func removeAll() {
        self = DiskUsage(found: [])
    }

    /// The least recently used entry, forgotten: the next to delete while the entries exceed the limit.
    mutating func takeOldest() -> String? {
        while head < order.count {
            let record = order[head]
            head += 1
            guard let use = uses[record.name], use.stamp == record.stamp else { continue }
            remove(record.name)
            return record.name
        }
        return nil
    }

    private mutating func record(_ name: String, size: Int, stamp: Int64) {
        let before = uses.updateValue(Use(size: size, stamp: stamp), forKey: name)
        totalSize += size - (before?.size ?? 0)
        lastStamp = max(lastStamp, stamp)
        order.append(Record(name: name, stamp: stamp))
    }

    /// Drops stale records once they outnumber the live ones, and the consumed head once it is most of the list.
    private mutating func compact() {
        if order.count - head > 2 * uses.count + 64 {
            order = order[head...].filter { uses[$0.name]?.stamp == $0.stamp }
            head = 0
        } else if head > 64, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
