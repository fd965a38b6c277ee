#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreMachine {
    /// What the store performs after unlocking, in this order: release the garbage, cancel, fail the cleared
    /// commits, publish, schedule the debounced writes, issue the level operations, reply, release the tickets.
    struct Effects {
        /// No effects yet: the event adds them.
        init() {}

        init(
            publish: Snapshot? = nil, fetchReplies: [FetchReply] = [], hitReplies: [HitReplyDelivery] = [],
            garbage: [Any] = [], released: [SaveTicket] = []
        ) {
            published = publish
            if !fetchReplies.isEmpty || !hitReplies.isEmpty || !garbage.isEmpty || !released.isEmpty {
                more = More()
                more!.fetchReplies = fetchReplies
                more!.hitReplies = hitReplies
                more!.garbage = garbage
                more!.released = released
            }
        }

        /// The first snapshot to publish, and the others after it, in order. Most effects publish one: it needs no
        /// array. The last is read from these two fields: a computed property read on a variable holding effects
        /// copies them whole.
        var published: Snapshot?
        var publishedLater: [Snapshot] = []
        /// The confirmed value a change replaced, released after unlocking.
        var replaced: StoredValue<Value>?
        /// What the key's confirmed value changed to (`nil`: none), from the value ``replaced`` holds, and where it came
        /// from when it did, for a store that reports it (its entities). Kept here rather than in ``more`` so that a
        /// write of a store sharing entities allocates nothing more.
        var confirmedValue: Value?
        var confirmedFrom: ConfirmationSource?
        /// Whether the caller issues the key's level operations (see ``StoreMachine/takeLevelOps(of:)``).
        var issueLevels = false
        /// Whether the caller issues a clear's `removeAll`.
        var removeAll = false
        /// Whether the caller's turn of running the key's changes is over (its queue was empty): it performs these
        /// effects and stops, without asking for the next change.
        var endsTurn = false
        /// The refetch of the key the machine began for its observers (owed by a fetch that ended), whose upstream
        /// load the caller starts; zero when none.
        var refetches = 0
        /// The effects a plain write has none of, kept apart, made only when needed. What that buys is measured in the
        /// benchmarks' README (*What the store's fast paths buy*): 6% of a write, 3.5% of a first read, for two
        /// allocations more per replayed mutation.
        var more: More?

        /// The effects a plain write has none of.
        final class More {
            var fetchReplies: [FetchReply] = []
            var hitReplies: [HitReplyDelivery] = []
            var garbage: [Any] = []
            var cancels: [any CancellationToken] = []
            var failedCommits: [PendingLoad<Void>] = []
            var debounce: [DebounceStart] = []
            /// Tickets to release last (work that waited for saves that were dropped or not needed).
            var released: [SaveTicket] = []

            init() {}

            func copy() -> More {
                let copy = More()
                copy.fetchReplies = fetchReplies
                copy.hitReplies = hitReplies
                copy.garbage = garbage
                copy.cancels = cancels
                copy.failedCommits = failedCommits
                copy.debounce = debounce
                copy.released = released
                return copy
            }
        }

        /// Adds `snapshot` to publish, after the others (nothing when `nil`: no observer, no reply).
        mutating func publish(_ snapshot: consuming Snapshot?) {
            guard let snapshot else { return }
            if published == nil { published = snapshot } else { publishedLater.append(snapshot) }
        }

        /// ``more``, made and not shared with another copy of these effects, to change. The lists below are changed
        /// in place there (an append in a loop, as a clear makes, copies nothing).
        mutating func uniqueMore() -> More {
            if more == nil {
                more = More()
            } else if !isKnownUniquelyReferenced(&more!) {
                more = more!.copy()
            }
            return more!
        }

        var fetchReplies: [FetchReply] {
            get { more?.fetchReplies ?? [] }
            _modify { yield &uniqueMore().fetchReplies }
        }
        var hitReplies: [HitReplyDelivery] {
            get { more?.hitReplies ?? [] }
            _modify { yield &uniqueMore().hitReplies }
        }
        var garbage: [Any] {
            get { more?.garbage ?? [] }
            _modify { yield &uniqueMore().garbage }
        }
        var cancels: [any CancellationToken] {
            get { more?.cancels ?? [] }
            _modify { yield &uniqueMore().cancels }
        }
        var failedCommits: [PendingLoad<Void>] {
            get { more?.failedCommits ?? [] }
            _modify { yield &uniqueMore().failedCommits }
        }
        var debounce: [DebounceStart] {
            get { more?.debounce ?? [] }
            _modify { yield &uniqueMore().debounce }
        }
        var released: [SaveTicket] {
            get { more?.released ?? [] }
            _modify { yield &uniqueMore().released }
        }
    }
}

extension Array {
    /// The elements that satisfy `belongs`, and the others, each in their order.
    func partitioned(by belongs: (Element) -> Bool) -> (matching: [Element], others: [Element]) {
        var matching: [Element] = []
        var others: [Element] = []
        for element in self {
            if belongs(element) { matching.append(element) } else { others.append(element) }
        }
        return (matching, others)
    }
}

/// What a ``StoreMachine`` let go of under the store's lock, to be released after unlocking: dropped entries and a
/// replaced response's storage, as plain references. It is not nested in the generic machine, so that moving it
/// costs no metadata look-up where the store runs unspecialized. One entry and one response need no allocation;
/// more entries (a clear, evictions) go to an array.
struct StoreReleased: Sendable {
    var entry: (any AnyObject & Sendable)?
    var entries: [any AnyObject & Sendable] = []
    var response: (any AnyObject & Sendable)?

    init() {}

    /// Whether the machine has notices for state observers (``StoreMachine/takeNotices()``).
    var hasNotices = false

    var isEmpty: Bool { entry == nil && response == nil && entries.isEmpty && !hasNotices }

    mutating func add(_ dropped: any AnyObject & Sendable) {
        if entry == nil { entry = dropped } else { entries.append(dropped) }
    }
}
