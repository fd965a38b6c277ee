extension Store {
    /// Shuts the store down, for a service on its way out (after its server stopped taking requests): waits, for at
    /// most `limit`, for the level writes issued so far to land (as ``flush()`` does), then gives back the fetch
    /// leases it holds (see ``FetchCoordination``), so that another instance fetches those keys at once instead of
    /// waiting for the leases to lapse. A write still under way after `limit` goes on without being waited for.
    ///
    /// The store keeps working afterwards; a fetch that was still in flight gives its lease back again when it ends.
    ///
    /// ```swift
    /// // The server stopped taking requests (SIGTERM):
    /// await store.shutDown(waitingAtMost: .seconds(5))
    /// ```
    public func shutDown(waitingAtMost limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.flush() }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()  // a flush cancelled stops waiting; its writes go on
        }
        await coordinator?.releaseAll()
    }
}
