/// The loads in flight of a coalesced family (``LoaderFamily/coalesced(events:)``): for each, its callers in the order they
/// joined and the token of its upstream load. Not generic, compiled once: a flight is found by its key's hash value
/// and recognized by the family's own comparison of keys, and a caller is the object the family made of it (its key
/// and its completion), which the table only holds. A caller's token is a ``FlightTicket``.
///
/// One lock guards the table. It is held only to look up, add or remove: never while a load starts, completes or is
/// cancelled, and nothing is released under it, so keys do not wait for each other's work.
final class FlightTable: Sendable {
    /// A caller as the table holds it: the object its family made of it.
    typealias Caller = any AnyObject & Sendable

    private struct Flight: Sendable {
        let id: Int
        var callers: OrderedQueue<Caller>
        var token: (any CancellationToken)?

        /// The caller that joined first: while a flight is in the table it has one (the last to leave removes it).
        var firstCaller: Caller {
            guard let first = callers.first else { preconditionFailure("A flight in the table has no caller") }
            return first.element
        }
    }

    private struct State: Sendable {
        /// The flights by their keys' hash values, one per hash value.
        var flights: [Int: Flight] = [:]
        /// The flights whose keys share a hash value with a flight in `flights` (rare: searched in turn).
        var sharingHash: [(hash: Int, flight: Flight)] = []
        /// The callers of finished flights not called yet, by flight id: each is taken out just before it is called,
        /// so that one that leaves meanwhile (cancelled by an earlier caller's completion, say) is never called.
        var delivering: [Int: OrderedQueue<Caller>] = [:]
        /// The last id given to a flight or a caller.
        var lastID = 0

        /// Runs `body` in place on flight `flight` of the key with `hash`, if it is in the table.
        mutating func updateFlight<Result>(_ flight: Int, hash: Int, _ body: (inout Flight) -> Result) -> Result? {
            if let index = flights.index(forKey: hash), flights.values[index].id == flight {
                return body(&flights.values[index])
            }
            guard let index = sharingHash.firstIndex(where: { $0.flight.id == flight }) else { return nil }
            return body(&sharingHash[index].flight)
        }

        /// Removes flight `flight` of the key with `hash`, for the caller to release after unlocking.
        mutating func removeFlight(_ flight: Int, hash: Int) -> Flight? {
            if let index = flights.index(forKey: hash), flights.values[index].id == flight {
                let removed = flights.remove(at: index).value
                if !sharingHash.isEmpty, let next = sharingHash.firstIndex(where: { $0.hash == hash }) {
                    flights[hash] = sharingHash.remove(at: next).flight
                }
                return removed
            }
            guard let index = sharingHash.firstIndex(where: { $0.flight.id == flight }) else { return nil }
            return sharingHash.remove(at: index).flight
        }

        /// Takes the next caller of finished flight `flight` out.
        mutating func takeDelivery(of flight: Int) -> Caller? {
            let next = delivering[flight]?.popFirst()?.element
            if delivering[flight]?.isEmpty ?? false { delivering[flight] = nil }
            return next
        }
    }

    private let state = Locked(State())

    /// Adds `caller` to the flight of its key, whose hash value is `hash`, found by `isKey` (given the flight's first
    /// caller), or to a new flight when the key has none. Returns the flight's id, the caller's id and whether the
    /// caller starts the flight.
    func join(
        _ caller: any AnyObject & Sendable, hash: Int, where isKey: (any AnyObject & Sendable) -> Bool
    ) -> (flight: Int, caller: Int, startsFlight: Bool) {
        state.withLock { state in
            state.lastID += 1
            let callerID = state.lastID
            let index = state.flights.index(forKey: hash)
            if let index {
                if isKey(state.flights.values[index].firstCaller) {
                    state.flights.values[index].callers.append(caller, id: callerID)
                    return (state.flights.values[index].id, callerID, false)
                }
                let sharing = state.sharingHash.firstIndex { $0.hash == hash && isKey($0.flight.firstCaller) }
                if let sharing {
                    state.sharingHash[sharing].flight.callers.append(caller, id: callerID)
                    return (state.sharingHash[sharing].flight.id, callerID, false)
                }
            }
            state.lastID += 1
            let started = Flight(id: state.lastID, callers: OrderedQueue(caller, id: callerID))
            if index == nil {
                state.flights[hash] = started
            } else {
                state.sharingHash.append((hash, started))
            }
            return (started.id, callerID, true)
        }
    }

    /// The token of caller `caller` of flight `flight`: cancelling it leaves the flight.
    func ticket(for caller: Int, of flight: Int, hash: Int) -> any CancellationToken {
        FlightTicket(table: self, hash: hash, flight: flight, caller: caller)
    }

    /// Keeps `token` as the upstream load of flight `flight`, if the flight is still going: returns `false` when the
    /// load completed before it returned its token (a memory hit answers at once).
    func keepToken(_ token: any CancellationToken, of flight: Int, hash: Int) -> Bool {
        state.withLock { state in
            state.updateFlight(flight, hash: hash) { $0.token = token } != nil
        }
    }

    /// Ends flight `flight`: returns its first caller, to be called first, and whether others wait for
    /// ``nextCaller(of:)``. A flight already over (every caller left) has none.
    func finish(_ flight: Int, hash: Int) -> (first: (any AnyObject & Sendable)?, hasMore: Bool) {
        let (first, hasMore, token) = state.withLock { state -> (Caller?, Bool, (any CancellationToken)?) in
            guard var finished = state.removeFlight(flight, hash: hash) else { return (nil, false, nil) }
            let first = finished.callers.popFirst()?.element
            guard !finished.callers.isEmpty else { return (first, false, finished.token) }
            state.delivering[flight] = exchange(&finished.callers, with: OrderedQueue())
            return (first, true, finished.token)
        }
        withExtendedLifetime(token) {}  // the completed load's token, released after unlocking
        return (first, hasMore)
    }

    /// Takes the next caller of finished flight `flight` to call, if one is left.
    func nextCaller(of flight: Int) -> (any AnyObject & Sendable)? {
        state.withLock { $0.takeDelivery(of: flight) }
    }

    /// Removes caller `caller` of flight `flight`, whether the flight is going or finished and delivering. The last
    /// caller out of a going flight cancels its upstream load.
    func leave(_ caller: Int, of flight: Int, hash: Int) {
        let (left, emptied) = state.withLock { state -> (Caller?, Flight?) in
            let removed = state.updateFlight(flight, hash: hash) { ($0.callers.remove(id: caller), $0.callers.isEmpty) }
            guard let (left, isEmpty) = removed else {
                let left = state.delivering[flight]?.remove(id: caller)
                if state.delivering[flight]?.isEmpty ?? false { state.delivering[flight] = nil }
                return (left, nil)
            }
            return (left, isEmpty ? state.removeFlight(flight, hash: hash) : nil)
        }
        emptied?.token?.cancel()
        withExtendedLifetime((left, emptied)) {}  // released after unlocking
    }
}

/// A caller's token in a flight still going when it joined: cancelling leaves the flight.
final class FlightTicket: CancellationToken {
    private let table: FlightTable
    private let hash: Int
    private let flight: Int
    private let caller: Int

    init(table: FlightTable, hash: Int, flight: Int, caller: Int) {
        self.table = table
        self.hash = hash
        self.flight = flight
        self.caller = caller
    }

    func cancel() {
        table.leave(caller, of: flight, hash: hash)
    }
}
