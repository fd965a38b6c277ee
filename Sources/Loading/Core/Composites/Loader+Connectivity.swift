extension Loader {
    /// Starts the load only while `connectivity` is online: offline, it waits, and starts once the network can be
    /// reached again. Cancelling stops the wait (or the load, once started).
    ///
    /// ```swift
    /// let profile = api.profile("me").waitingForNetwork(connectivity)
    /// let token = profile.load { result in show(result) }   // offline: starts when the network comes back
    /// ```
    /// Only the start waits: a load that fails because the network went away meanwhile fails as usual (put retries
    /// inside, so that they too wait for nothing but their delays).
    public func waitingForNetwork(_ connectivity: some ConnectivityMonitor) -> AnyLoader<Output> {
        AnyLoader { completion in
            guard !connectivity.isOnline else { return load(completion: completion) }
            let pending = PendingLoad(completion)
            let started = Locked(false)
            pending.startStep {
                connectivity.onlineStates.sink { isOnline in
                    guard isOnline, !started.withLock({ exchange(&$0, with: true) }) else { return }
                    // Replaces the wait: its subscription is cancelled as the load starts.
                    pending.startStep { load { pending.complete($0) } }
                }
            }
            return pending
        }
    }

    /// Fails at once with ``OfflineError`` while `connectivity` is offline, without starting the load: no request
    /// that cannot succeed, and no retry loop while offline.
    ///
    /// ```swift
    /// let profile = api.profile("me").failingWhileOffline(connectivity)
    /// ```
    public func failingWhileOffline(_ connectivity: some ConnectivityMonitor) -> AnyLoader<Output> {
        AnyLoader { completion in
            guard connectivity.isOnline else {
                completion(.failure(OfflineError()))
                return AnyCancellationToken {}
            }
            return load(completion: completion)
        }
    }
}
