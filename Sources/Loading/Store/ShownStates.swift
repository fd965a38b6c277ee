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
