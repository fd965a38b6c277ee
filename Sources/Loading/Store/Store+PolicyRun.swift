#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Runs `policy` for `key` for a stream, which shows the key's changes itself: `fail` is told when the policy
    /// ends with nothing to show.
    @inlinable
    func run(
        _ policy: ReadPolicy, for key: Key, fail: @escaping @Sendable (any Error) -> Void
    ) -> any CancellationToken {
        let read = PolicyRun(store: self, key: key, policy: policy, onFailure: fail)
        read.start()
        return read
    }

    /// A policy's read in progress: it reads the levels in order, fetches when they have nothing the policy takes,
    /// and answers its caller with the first response (a level's hit, the fetched value, or the value shown with the
    /// fetch's error attached). It is also the read's cancellation token.
    ///
    /// One object carries the whole read, so that its steps need no closure state of their own. What another
    /// thread may touch (`completion`, `isCancelled`, `joinedFetch`, `since`) changes only under the store's lock, with
    /// the machine's work; the fields of the level read in flight are set before that read starts and read by its
    /// completion, one level after another. That is what makes it safe to send.
    @usableFromInline
    final class PolicyRun: CancellationToken, @unchecked Sendable {
        /// What the levels are read for, and so what their answer means.
        @usableFromInline
        enum Purpose {
            /// A cache-first or cache-only read: the first hit young enough for the policy answers.
            case cache
            /// A cache-then-network read with nothing shown: any hit answers, then the fetch runs unless it is fresh.
            case cacheThenNetwork
            /// A fetch failed: a level's value is shown with `error` attached, else the store's, else the read fails.
            case fallback(any Error)
        }

        @usableFromInline let store: Store
        @usableFromInline let key: Key
        @usableFromInline let policy: ReadPolicy
        /// When the read began (only when the policy judges age).
        @usableFromInline let began: Date
        /// Whether the store held the key when the read first looked at it (see ``begin(_:)``).
        @usableFromInline let held: Bool
        /// A stream's read: told of a failure only, as the stream shows the key's changes.
        @usableFromInline let onFailure: (@Sendable (any Error) -> Void)?
        /// A load's completion, until it is answered or cancelled.
        @usableFromInline var completion: HandedCompletion<StoreResponse<Value>>?
        @usableFromInline var isCancelled = false
        /// The fetch the read waits for (the fetch's id, the read's caller id), which a cancel leaves.
        @usableFromInline var joinedFetch: (id: Int, caller: Int)?
        /// The stamp of the read's first level read: what the store knew when the read began.
        @usableFromInline var since: Machine.ReadStamp?
        // The level read in flight.
        @usableFromInline var purpose = Purpose.cache
        @usableFromInline var level = 0
        @usableFromInline var stamp = Machine.ReadStamp(
            generation: 0, confirmedVersion: 0, staleMark: 0)
        @usableFromInline var inStep = false
        @usableFromInline var rules: Machine.StaleRules?
        /// Whether the read holds its key in the store from a cache-then-network hit until its fetch has begun, so
        /// that the value it served stays shown meanwhile (set and read by the read's own steps, one after another).
        @usableFromInline var holdsKey = false
        /// Whether the read waited for the changes asked before it (see ``start()``).
        @usableFromInline var hasWaited = false
        /// What stops the level read in flight early, when its level can (set and taken under the store's lock).
        @usableFromInline var stopLevelRead: (@Sendable () -> Void)?
        /// Where the read stands in the store's order, once it began (after the changes asked before it): a change
        /// asked after it is applied again to what its fetch brings. Set under the store's lock.
        @usableFromInline var asked: Int?

        @inlinable
        init(
            store: Store, key: Key, policy: ReadPolicy, began: Date? = nil, held: Bool = true,
            onFailure: (@Sendable (any Error) -> Void)?
        ) {
            self.store = store
            self.key = key
            self.policy = policy
            self.began = began ?? (policy.maxAgeSeconds == nil ? Date.distantPast : store.now())
            self.held = held
            self.onFailure = onFailure
        }

        /// Starts the read of a load, made when ``Store/read(_:policy:)``'s loader looked at the key and found no
        /// answer: it answers `completion`, and it is the load's token. A key the store did not hold then is read from
        /// the levels (or fetched) at once.
        @inlinable
        func begin(_ completion: HandedCompletion<StoreResponse<Value>>) -> any CancellationToken {
            self.completion = completion  // before the read is shared: no lock needed
            if held { start() } else { startWithNothingHeld() }
            return self
        }

        /// Answers from the store's value when the policy takes it, else reads the levels or fetches; after the
        /// changes of the key asked before it, when some run or wait (a read sees the writes made before it).
        @inlinable
        func start() {
            let cached = store.locked(key) { machine, slot -> (snapshot: Machine.Snapshot?, fresh: Bool)?? in
                // The read's place in the store's order: before the changes asked after it, which its fetch applies
                // again to what it brings.
                if asked == nil { asked = machine.readStamp }
                if !hasWaited, machine.awaitTurn(of: slot, then: { [self] in afterTurn() }) { return nil }
                if since == nil, policy.kind == .cacheFirst || policy.kind == .cacheOnly {
                    since = machine.stamp(of: slot)
                }
                return machine.cached(slot, under: policy, now: began)
            }
            guard let cached else { return }  // its turn comes later
            switch policy.kind {
            case .cacheFirst, .cacheOnly:
                guard let snapshot = cached?.snapshot, cached?.fresh == true else { return readLevel(0, for: .cache) }
                if let events = store.events { events(.heldValueRead(key)) }
                answer(StoreResponse(snapshot.response))
            case .cacheThenNetwork:
                guard let cached, let snapshot = cached.snapshot else { return readLevel(0, for: .cacheThenNetwork) }
                if let events = store.events { events(.heldValueRead(key)) }
                answer(StoreResponse(snapshot.response))
                if !cached.fresh { startFetch() }
            case .networkFirst, .networkOnly:
                startFetch()
            }
        }

        /// The read's turn came, after the changes asked before it: it goes on (once; changes asked after it do not
        /// hold it again).
        @inlinable
        func afterTurn() {
            hasWaited = true
            start()
        }

        /// ``start()`` for a key the store did not hold a moment ago, which it need not look at again: the levels
        /// are read (or, for a network policy, the fetch begins), and what the store learned meanwhile is found there.
        @inlinable
        func startWithNothingHeld() {
            switch policy.kind {
            case .cacheFirst, .cacheOnly:
                // The store held nothing: a value it confirms before the read's fetch begins is the answer.
                since = Machine.ReadStamp(generation: 0, confirmedVersion: 0, staleMark: 0)
                readLevel(0, for: .cache)
            case .cacheThenNetwork: readLevel(0, for: .cacheThenNetwork)
            case .networkFirst, .networkOnly: startFetch()
            }
        }

        /// Cancels the read while it has not answered; once it has, what it still does (the fetch of a
        /// cache-then-network read) goes on.
        @inlinable
        func cancel() {
            typealias Left = (garbage: [Any], cancel: (any CancellationToken)?, stop: (@Sendable () -> Void)?)
            let (taken, left) = store.locked(key) { machine, slot -> (HandedCompletion<StoreResponse<Value>>?, Left?) in
                guard !isCancelled, onFailure != nil || self.completion != nil else { return (nil, nil) }
                isCancelled = true
                let left = joinedFetch.map { machine.leaveFetch($0.id, caller: $0.caller, of: slot) }
                joinedFetch = nil
                return (self.completion.take(), (left?.garbage ?? [], left?.cancel, stopLevelRead.take()))
            }
            left?.cancel?.cancel()
            left?.stop?()
            withExtendedLifetime((taken, left?.garbage)) {}  // released after unlocking
        }

        // MARK: Answering

        @inlinable
        func answer(_ response: StoreResponse<Value>) {
            guard onFailure == nil else { return }
            let completion = store.locked { _ in self.completion.take() }
            completion?.call(.success(response))
        }

        @inlinable
        func fail(_ error: any Error) {
            if let onFailure {
                if !store.locked({ _ in isCancelled }) { onFailure(error) }
                return
            }
            let completion = store.locked { _ in self.completion.take() }
            completion?.call(.failure(error))
        }

        /// Attaches `error` to the key's shown value and answers with it, or fails when nothing is shown.
        @inlinable
        func reportOrFail(_ error: any Error) {
            guard let snapshot = store.locked(key, { $0.attach(error, to: $1) }) else { return fail(error) }
            store.engine.publish(snapshot)
            answer(StoreResponse(snapshot.response))
        }
    }
}

/// A load's completion in the form `AnyLoader` hands it over, its output's type left generic. A read keeps it and
/// calls it in that form: converting a kept closure to another calling form allocates (a response is passed
/// directly, but an output of unknown type indirectly).
@usableFromInline
struct HandedCompletion<Output: Sendable> {
    @usableFromInline let call: LoadCompletion<Output>

    @inlinable
    init(_ call: @escaping LoadCompletion<Output>) {
        self.call = call
    }
}
