#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A key's observers, of values and of states: what its state observers were shown last (`ShownStates`), then the
// machine's events that count observers, tell them the key is loading, and note its failures.

extension StoreMachine {
    /// What a key's state observers (``Store/states(for:)``) were shown last: whether the key was loading, and
    /// whether they were told its latest failure. A failure is news only while the confirmed value is the one it was
    /// noted at: a value confirmed, removed or cleared since makes it old.
    struct ShownStates {
        private var failure: (any Error)?
        private var failureVersion = -1
        private var failureShown = true
        private var loadingShown = false

        /// The failure to show with confirmed version `version`: the latest, unless a value was confirmed since.
        /// Whether a failure is kept (the caller's error: released only after unlocking).
        var holdsFailure: Bool { failure != nil }

        func failure(at version: Int) -> (any Error)? {
            failureVersion == version ? failure : nil
        }

        /// Notes that a fetch failed with `error` while the confirmed version was `version`. Returns whether the
        /// observers must be told: not when a failure is news already (the next notice shows the latest).
        mutating func noteFailure(_ error: any Error, at version: Int) -> Bool {
            let isNewsAlready = failure(at: version) != nil
            (failure, failureVersion) = (error, version)
            guard !isNewsAlready else { return false }
            failureShown = false
            return true
        }

        /// Whether a notice would show something new: the key started or stopped loading since they were shown it,
        /// or a failure was not told.
        func isBehind(isLoading: Bool) -> Bool {
            isLoading != loadingShown || !failureShown
        }

        /// A snapshot of the key's value showed whether it was loading.
        mutating func showLoading(_ isLoading: Bool) {
            loadingShown = isLoading
        }

        /// A notice showed whether the key was loading, and its latest failure.
        mutating func showNotice(isLoading: Bool) {
            (loadingShown, failureShown) = (isLoading, true)
        }
    }
}

extension StoreMachine {
    /// Counts an observer of `key` and returns the subject it subscribes to (the key's, else `fresh`), with what
    /// the key shows now, if anything, to publish. Returns `nil`, counting nothing, when the key has no subject and
    /// `fresh` is `nil`: the caller makes one (outside the lock) and asks again.
    mutating func observe(_ key: Key, fresh: Subject?) -> (subject: Subject, shown: Snapshot?)? {
        let entry = ensureEntry(key)
        let subject: Subject
        if let changes = entry.observed?.changes {
            subject = changes
        } else {
            guard let fresh else {
                release(key)
                return nil
            }
            observe(entry, changes: fresh, states: entry.observed?.states)
            subject = fresh
        }
        entry.observers += 1
        return (subject, shown(key))
    }

    /// Forgets an observer of `key`; the last one of its values takes the key's subject away (returned, to release
    /// unlocked).
    mutating func stopObserving(_ key: Key) -> Subject? {
        guard let entry = entry(key) else { return nil }
        entry.observers -= 1
        entry.observedAt = next()
        var subject: Subject?
        if entry.observers == entry.stateObservers, let observed = entry.observed {
            subject = observed.changes
            observe(entry, changes: nil, states: observed.states)
        }
        release(key)
        return subject
    }

    /// Replaces the subjects of `entry`'s observers; the ones before are released after unlocking.
    mutating func observe(_ entry: Entry, changes: Subject?, states: StateSubject?) {
        entry.observedAt = next()
        let observed = changes == nil && states == nil ? nil : Observed(changes: changes, states: states)
        if let before = exchange(&entry.observed, with: observed) { released.add(before) }
    }

    /// Counts a state observer of `key` (``Store/states(for:)``) and returns the state subject it subscribes to (the
    /// key's, else `fresh`), with the key's state now to publish to it. Returns `nil`, counting nothing, when the key
    /// has no state subject and `fresh` is `nil`: the caller makes one (outside the lock) and asks again.
    mutating func observeStates(_ key: Key, fresh: StateSubject?) -> (subject: StateSubject, now: Snapshot)? {
        let entry = ensureEntry(key)
        let subject: StateSubject
        if let states = entry.observed?.states {
            subject = states
        } else {
            guard let fresh else {
                release(key)
                return nil
            }
            observe(entry, changes: entry.observed?.changes, states: fresh)
            subject = fresh
        }
        entry.observers += 1
        entry.stateObservers += 1
        // A new version, so that a screen that read the state now (``stateNow(_:)``) before it subscribed takes it.
        entry.version = next()
        let now = Snapshot(entry: entry, version: entry.version, error: failure(of: entry), isNotice: true)
        entry.shown.showLoading(now.isLoading)
        return (subject, now)
    }

    /// Forgets a state observer of `key`; the last one takes the key's state subject away (returned, to release
    /// unlocked).
    mutating func stopObservingStates(_ key: Key) -> StateSubject? {
        guard let entry = entry(key) else { return nil }
        entry.observers -= 1
        entry.stateObservers -= 1
        var subject: StateSubject?
        if entry.stateObservers == 0, let observed = entry.observed {
            subject = observed.states
            observe(entry, changes: observed.changes, states: nil)
        }
        release(key)
        return subject
    }

    /// What `key` shows now, and whether the store fetches it; `nil` when the store does not hold it.
    func stateNow(_ key: Key) -> (Snapshot, isLoading: Bool)? {
        guard let slot = slot(key) else { return nil }
        let now = Snapshot(slot, error: slot.entry.flatMap(failure(of:)), isNotice: true)
        return (now, slot.entry?.isLoading ?? false)
    }

    /// A fetch of `entry`'s key ended: the fetch list's storage, when no fetch is left, goes back to the machine
    /// (``spareFetches``), and the key's state observers are told (``loadingMayChange(_:)``).
    mutating func fetchEnded(_ entry: Entry) {
        entry.work.fetches.giveStorage(to: &spareFetches)
        loadingMayChange(entry)
    }

    /// A fetch of `entry`'s key began or ended: its state observers, if it has some, are told once the event is over
    /// (``takeNotices()``), unless a snapshot published by the event shows it already.
    mutating func loadingMayChange(_ entry: Entry) {
        guard entry.observed?.states != nil else { return }
        loadingTouched.append(entry)
        released.hasNotices = true
    }

    /// A fetch of `key` failed: until a value is confirmed, removed or cleared, its state observers are shown the
    /// failure whenever the store is not fetching the key (told once the event is over).
    mutating func noteFailure(_ error: any Error, of key: Key) {
        guard let entry = peek(key), entry.observed?.states != nil else { return }
        guard entry.shown.noteFailure(error, at: entry.confirmed.version) else { return }
        loadingTouched.append(entry)
        released.hasNotices = true
    }

    /// The failure `entry`'s state observers are shown, when it is still the latest news of the key.
    func failure(of entry: Entry) -> (any Error)? {
        entry.shown.failure(at: entry.confirmed.version)
    }

    /// The notices for the state observers of the keys that began or stopped loading, or failed, since the last call
    /// (see ``loadingMayChange(_:)`` and ``noteFailure(_:of:)``), for the caller to publish after unlocking; each is
    /// a new version.
    mutating func takeNotices() -> [Snapshot] {
        var notices: [Snapshot] = []
        for entry in exchange(&loadingTouched, with: []) where entry.observed?.states != nil {
            guard entry.shown.isBehind(isLoading: entry.isLoading) else { continue }
            entry.version = next()
            let notice = Snapshot(entry: entry, version: entry.version, error: failure(of: entry), isNotice: true)
            entry.shown.showNotice(isLoading: notice.isLoading)
            notices.append(notice)
        }
        return notices
    }
}
