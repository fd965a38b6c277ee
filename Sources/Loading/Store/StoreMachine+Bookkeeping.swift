#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// A change of `key` the app made confirmed. What the app writes is the latest it knows, as of when it asked: the
    /// key is fresh, unless an invalidation came after that (while the change waited for its turn or ran); then a
    /// refetch owed only for invalidations before it is settled all the same.
    mutating func changeMakesFresh(_ key: Key) {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        let asking = entry.work.turn.asking
        if asking > entry.staleness.mark { return makeFresh(key, from: asking) }
        entry.staleness.changeConfirmed(askedAt: asking)
    }

    /// `key`'s value is fresh from `point` in the store's order: not stale, and not judged stale by an older
    /// invalidation when only the levels hold it.
    mutating func makeFresh(_ key: Key, from point: Int) {
        entry(key, heldBecause: "a fresh value of the key was just confirmed").staleness.makeFresh()
        noteRefreshed(key, from: point)
    }

    mutating func log(_ change: @escaping Change, for key: Key) {
        let entry = entry(key, heldBecause: "a change of the key is running (one change at a time)")
        guard !entry.work.fetches.isEmpty else {
            entry.log.skip(askedAt: entry.work.turn.asking)
            return
        }
        // Numbered by when it was asked: a fetch that began before applies it again, one that began after does not.
        entry.log.append(change, askedAt: entry.work.turn.asking, generation: entry.generation)
    }

    /// Forgets the logged changes no fetch in flight needs any more.
    mutating func trimLog(of key: Key) {
        let entry = entry(key, heldBecause: "a fetch of the key just ended")
        entry.log.trim(keepingAfter: entry.work.fetches.oldestLogStart())
    }

    /// A new version of what `key` shows: the snapshot its observers are sent, made only when it has observers or
    /// when it `answers` a caller as well (a snapshot holds its response: made for nobody, it would be an allocation
    /// for nothing).
    mutating func publish(_ key: Key, error: (any Error)? = nil, answers: Bool = false) -> Snapshot? {
        let entry = entry(key, heldBecause: "what the key shows just changed")
        entry.version = next()
        guard answers || entry.observed != nil else { return nil }
        let snapshot = Snapshot(entry: entry, version: entry.version, error: error)
        if entry.observed?.states != nil { entry.shown.showLoading(snapshot.isLoading) }
        return snapshot
    }

    /// What `key` shows, at its current version (a value of `nil` when it shows nothing).
    func shownNow(_ key: Key) -> Snapshot {
        guard let slot = slot(key) else { preconditionFailure("A key has no entry, yet what it shows is asked") }
        return Snapshot(slot)
    }

    /// Drops `key`'s entry when nothing needs it any more, unless its value is among the last `keptValues` to
    /// fall out of use. A kept key stays an entry until the next key falls out of use: then it is held as its record
    /// alone, and its entry is made the next key's (``compact(_:)``). A key used again and again (a list a page is
    /// added to, a key written in a burst) is not made a record and an entry on each use.
    mutating func release(_ key: Key) {
        guard let entry = peek(key), entry.isIdle else { return }
        guard keptValues > 0, entry.confirmed.value != nil else {
            drop(key)
            return
        }
        kept.keep(entry, key: key, stamp: next())
        letGoOfKeptValues(beyond: keptValues)
        if let previous = exchange(&lastKept, with: key), previous != key { compact(previous) }
    }

    /// Holds `key` as its record alone when it is kept and idle: its entry is made the next key's (``spareEntry``),
    /// unless it holds something of the caller's (then it is released after unlocking).
    private mutating func compact(_ key: Key) {
        guard let entry = entries.entry(at: key), entry.isIdle, entry.keptStamp != nil else { return }
        let record = spareRecord.take() ?? KeyRecord(key: key, generation: entry.generation)
        record.take(entry)
        entries[key] = .kept(record)
        if recent === entry { recent = nil }
        if spareEntry == nil, entry.holdsNothingOfTheCallers { spareEntry = entry } else { released.add(entry) }
    }

    /// Lets go of every kept value (the system asks for memory): the keys no longer in use are dropped, and their
    /// levels hold their values; a kept key back in use keeps its value and only stops counting as kept.
    mutating func dropKeptValues() {
        letGoOfKeptValues(beyond: 0)
    }

    /// Lets go of the oldest kept values until at most `bound` are kept: an entry no longer in use is dropped; each
    /// key is told as evicted when the store has events.
    private mutating func letGoOfKeptValues(beyond bound: Int) {
        while let key = kept.takeOldest(beyond: bound, of: entries) {
            if entries.entry(at: key)?.isIdle ?? true { drop(key) }
            if recordsEvictions {
                evicted.append(key)
                released.hasNotices = true  // told after unlocking (see ``takeEvictions()``)
            }
        }
    }

    mutating func drop(_ key: Key) {
        guard let record = entries.removeValue(forKey: key) else { return }
        dropped.append(key)
        if recent?.key == key { recent = nil }
        kept.forget(record)
        released.add(record)
    }
}
