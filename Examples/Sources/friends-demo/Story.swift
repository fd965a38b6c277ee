import Foundation
import FriendsDomain
import FriendsServer
import Loading
import LoadingScreens

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The demo's story: each step loads through the composition and checks where the result came from.
final class Story: Sendable {
    private let options: Options
    private let server: FriendsAPIServer?
    private let baseURL: URL
    private let databaseURL: URL
    private let clock = DemoClock()
    private let log = EventRecorder()
    private let output: Output
    private let maxAge: Duration = .seconds(300)

    init(options: Options) throws {
        self.options = options
        output = Output(quiet: options.quiet)
        if let baseURL = options.baseURL {
            server = nil
            self.baseURL = baseURL
        } else {
            let server = try FriendsAPIServer(friends: Self.friends(count: 24), latency: .milliseconds(60))
            self.server = server
            baseURL = server.baseURL
        }
        if let databaseURL = options.databaseURL {
            self.databaseURL = databaseURL
        } else {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "friends-demo-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            databaseURL = folder.appendingPathComponent("friends.sqlite")
        }
    }

    func run() async -> Bool {
        output.header(
            server.map { _ in "embedded friends API at \(baseURL.absoluteString), 60 ms latency" }
                ?? "friends API at \(baseURL.absoluteString)",
            database: databaseURL.path)
        if options.databaseURL != nil {
            // The story starts cold: empty the demo's database (through the store, so the file stays valid).
            let store = SQLiteFriendsStore(fileURL: self.databaseURL)
            await withCheckedContinuation { continuation in
                store.deleteAll { _ in continuation.resume() }
            }
        }
        var results: [(String, Bool)] = []
        func record(_ title: String, _ passed: Bool) { results.append((title, passed)) }

        let first = makeComposer()
        record(
            "Cold start",
            await step("Cold start", expect: [.memory: .miss, .database: .miss, .network: .hit]) {
                try await first.friendsLoader.load()
            })
        record(
            "Warm load",
            await step("Warm load", expect: [:]) {
                try await first.friendsLoader.load()
            })
        output.detail("the store's own value: no cache read, no request")
        record(
            "Friend by id, in the list",
            await step("Friend by id, in the list", expect: [:]) {
                [try await first.friend(id: "u3").load()]
            })
        if let server {
            let newcomer = Friend(
                id: "u99", name: "New Friend", status: .online, updatedAt: Date(timeIntervalSince1970: 1_795_000_500))
            server.setFriends(server.friends + [newcomer])
            record(
                "Friend by id, from the API",
                await step("Friend by id, from the API", expect: [.network: .hit]) {
                    [try await first.friend(id: "u99").load()]
                })
            for line in log.timeline() { output.detail(line) }
            let joined = (try? await first.friendsLoader.load())?.contains(newcomer) == true
            output.detail("GET /friends/u99, then merged into the list: \(joined ? "yes" : "no")")
            record("Friend by id joins the list", joined)
            server.setFriends(Array(server.friends.dropLast()))
        } else {
            output.skip("Friend by id, from the API", because: "needs the embedded server")
        }
        // What the network brought is in the database before it is shown: a restart finds it.
        record("Killed right after a load", await killedAfterLoad())
        if let server {
            record("A widget follows the app", await widgetFollowsTheApp(server: server))
        } else {
            output.skip("A widget follows the app", because: "needs the embedded server")
        }
        // The app going to the background saves what live changes wait for the debounce (the friend merged above).
        await withCheckedContinuation { continuation in first.flush { continuation.resume() } }
        if let server {
            server.stop()
            let restarted = makeComposer()
            record(
                "Restart, server down",
                await step("Restart, server down", expect: [.memory: .miss, .database: .hit]) {
                    try await restarted.friendsLoader.load()
                })
            try? server.start()
        } else {
            output.skip("Restart, server down", because: "needs the embedded server")
        }

        let afterExpiry = makeComposer()
        _ = try? await afterExpiry.friendsLoader.load()
        clock.advance(by: maxAge + .seconds(1))
        record(
            "Cache expiry",
            await step("Cache expiry (clock +5 min)", expect: [.memory: .miss, .database: .miss, .network: .hit]) {
                try await afterExpiry.friendsLoader.load()
            })

        if let server {
            clock.advance(by: maxAge + .seconds(1))
            server.failNextListRequests(2)
            let before = server.listRequestCount
            let passed = await step(
                "Server fails twice, recovers", expect: [.memory: .miss, .database: .miss, .network: .hit]
            ) {
                try await afterExpiry.friendsLoader.load()
            }
            let attempts = server.listRequestCount - before
            output.detail("\(attempts) attempts: 500, 500, then 200 (backoff 200 ms, 400 ms)")
            record("Server fails twice, recovers", passed && attempts == 3)

            record("Burst of live updates", await burst(server: server, composer: afterExpiry))
            record("Optimistic delete refused", await refusedDelete(server: server, composer: afterExpiry))
            record("Offline deletes, restart", await offlineDeletes(server: server))
            record("Added offline, restart", await offlineAddition(server: server))
            record("Pages of the list", await pages(server: server))
            record("Renamed once, shown everywhere", await renamedEverywhere(server: server))
            record("Rename met a conflict", await renameConflicts(server: server))
        } else {
            for title in [
                "Server fails twice, recovers", "Burst of live updates", "Optimistic delete refused",
                "Offline deletes, restart", "Added offline, restart", "Pages of the list",
                "Renamed once, shown everywhere", "Rename met a conflict",
            ] {
                output.skip(title, because: "needs the embedded server")
            }
        }

        server?.stop()
        return output.summary(results)
    }

    // MARK: - Steps

    private func makeComposer(
        databaseURL: URL? = nil, connectivity: (any ConnectivityMonitor)? = nil, pageSize: Int = 20,
        changeJournalURL: URL? = nil,
        resolveRenameConflict: @escaping FriendsComposer.RenameConflictResolver = { _ in .rebase }
    ) -> FriendsComposer {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        return FriendsComposer(
            configuration: .init(
                baseURL: baseURL, databaseURL: databaseURL ?? self.databaseURL, maxAge: maxAge,
                retry: .exponential(initial: .milliseconds(200), maxDelay: .seconds(2), maxAttempts: 3),
                timeout: .seconds(5), saveDebounce: .milliseconds(250), connectivity: connectivity,
                pageSize: pageSize, changeJournalURL: changeJournalURL,
                resolveRenameConflict: resolveRenameConflict),
            session: URLSession(configuration: configuration),
            currentDate: { [clock] in clock.now },
            onEvent: log.record)
    }

    private func step(
        _ title: String,
        expect expected: [FriendsComposer.Source: Outcome],
        _ load: () async throws -> [Friend]
    ) async -> Bool {
        log.reset()
        let start = ContinuousClock.now
        let result: Result<[Friend], any Error>
        do { result = .success(try await load()) } catch { result = .failure(error) }
        let elapsed = ContinuousClock.now - start
        let outcomes = log.outcomes()
        let passed =
            (try? result.get()) != nil && expected.allSatisfy { outcomes[$0.key] == $0.value }
            && outcomes.keys.allSatisfy { expected[$0] != nil }
        output.step(
            title, outcomes: outcomes, count: try? result.get().count, elapsed: elapsed, passed: passed,
            error: result.failureDescription)
        return passed
    }

    private func burst(server: FriendsAPIServer, composer: FriendsComposer) async -> Bool {
        let start = ContinuousClock.now
        log.reset()
        let lists = Locked<[[Friend]]>([])
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }
        guard await eventually({ lists.withLock { $0.count } >= 1 && server.openEventStreams >= 1 }) else {
            output.failure("Burst of live updates", "the event stream did not open")
            return false
        }
        let updates = 300
        var friends = server.friends
        for index in 0..<updates {
            var friend = friends[index % friends.count]
            friend.status = index.isMultiple(of: 2) ? .away : .online
            friend.name = "\(friend.name.split(separator: " #").first ?? "") #\(index)"
            friend.updatedAt = Date(timeIntervalSince1970: 1_795_000_000 + Double(index))
            friends = friends.applying(.upsert(friend))
            server.push(.upsert(friend))
            if index % 100 == 99 { try? await Task.sleep(for: .milliseconds(400)) }  // three bursts
        }
        let final = friends
        let merged = await eventually({ lists.withLock { $0.last } == final })
        try? await Task.sleep(for: .milliseconds(400))  // let the last debounced save land
        subscription.cancel()
        let writes = log.databaseWrites()
        let saved = await storedFriends() == friends
        let passed = merged && saved && writes >= 1 && writes <= 10
        output.row(
            "Burst of live updates", source: "events", count: friends.count, elapsed: ContinuousClock.now - start,
            passed: passed,
            note: "\(updates) updates merged, \(writes) database writes, last state saved: \(saved ? "yes" : "no")")
        return passed
    }

    private func refusedDelete(server: FriendsAPIServer, composer: FriendsComposer) async -> Bool {
        let start = ContinuousClock.now
        let repository = FriendsRepository(composer: composer)
        let states = Locked<[LoadingState<[Friend]>]>([])
        let events = Locked<[String]>([])
        let stateSubscription = repository.state.sink { state in states.withLock { $0.append(state) } }
        let eventSubscription = repository.events.sink { event in
            if case .deletionFailed(let id, let error) = event { events.withLock { $0.append("\(id): \(error)") } }
        }
        repository.load()
        guard await eventually({ repository.currentState.value != nil }), let before = repository.currentState.value,
            let victim = before.first
        else {
            output.failure("Optimistic delete refused", "the list did not load")
            return false
        }
        server.setDeleteStatus(409)  // a refusal: a transient failure (a 500) would keep the delete waiting
        let done = Locked(false)
        repository.remove(id: victim.id, optimistic: true) { _ in done.withLock { $0 = true } }
        let removedAtOnce = repository.currentState.value?.contains(victim) == false
        _ = await eventually({ done.withLock { $0 } })
        server.setDeleteStatus(nil)
        let restored = repository.currentState.value == before
        let cachesMatch = await storedFriends() == before
        let toasted = events.withLock { $0.count } == 1
        stateSubscription.cancel()
        eventSubscription.cancel()
        let passed = removedAtOnce && restored && cachesMatch && toasted
        output.row(
            "Optimistic delete refused", source: "network", count: repository.currentState.value?.count,
            elapsed: ContinuousClock.now - start, passed: passed,
            note:
                "removed at once: \(removedAtOnce ? "yes" : "no"), rolled back: \(restored ? "yes" : "no"), toast: \(events.withLock { $0.first } ?? "none")"
        )
        return passed
    }

    /// Offline, two friends are deleted: gone at once, kept on disk, nothing sent. The app restarts (a new
    /// composition on the same files), still offline: both are still gone. The network comes back: both deletes reach
    /// the server, in the order they were made, each with its idempotency key.
    private func offlineDeletes(server: FriendsAPIServer) async -> Bool {
        let title = "Offline deletes, restart"
        let start = ContinuousClock.now
        let offline = ManualConnectivity(isOnline: false)
        let before = makeComposer(connectivity: offline)
        guard let list = try? await before.friendsLoader.load(), list.count >= 2 else {
            output.failure(title, "the list did not load from the caches")
            return false
        }
        let victims = [list[1].id, list[0].id]
        for id in victims { before.deleteFriend(id: id) }
        let goneAtOnce = (try? await before.friendsLoader.load())?.contains { victims.contains($0.id) } == false
        let deletedBefore = server.deletedIDs
        // Said under the step's row, once it is printed.
        var details = [
            "offline: deleted \(victims.joined(separator: ", ")), gone at once: \(goneAtOnce ? "yes" : "no")"
        ]

        let connectivity = ManualConnectivity(isOnline: false)
        let restarted = makeComposer(connectivity: connectivity)
        let pending = restarted.pendingDeletes?.pending.map(\.input) ?? []
        let stillGone = (try? await restarted.friendsLoader.load())?.contains { victims.contains($0.id) } == false
        details.append("restarted: \(pending.count) deletes waiting, still gone: \(stillGone ? "yes" : "no")")
        let nothingSentOffline = server.deletedIDs == deletedBefore
        connectivity.setOnline(true)
        let sent = await eventually { restarted.pendingDeletes?.isMutating == false }
        let reached = Array(server.deletedIDs.dropFirst(deletedBefore.count))
        let keys = server.deleteKeys.suffix(reached.count).compactMap { $0 }
        details.append(
            "online: the server deleted \(reached.joined(separator: ", ")), with \(keys.count) idempotency keys")
        let passed =
            goneAtOnce && nothingSentOffline && pending == victims && stillGone && sent
            && reached == victims && keys.count == victims.count
        output.row(
            title, source: "network", count: try? await restarted.friendsLoader.load().count,
            elapsed: ContinuousClock.now - start, passed: passed, note: "deleted in order after the restart")
        for line in details { output.detail(line) }
        return passed
    }

    /// A friend added offline shows at once under a temporary id, again after a restart, and takes the server's id
    /// once the network is back: one friend on the server, one in the list.
    private func offlineAddition(server: FriendsAPIServer) async -> Bool {
        let title = "Added offline, restart"
        let start = ContinuousClock.now
        let name = "Grace (added offline)"
        let before = makeComposer(connectivity: ManualConnectivity(isOnline: false))
        guard (try? await before.friendsLoader.load()) != nil, let temporary = try? before.addFriend(named: name) else {
            output.failure(title, "the friend could not be added")
            return false
        }
        let shownAtOnce = (try? await before.friendsLoader.load())?.contains { $0.id == temporary } == true
        let creationsBefore = server.createRequestCount
        // Said under the step's row, once it is printed.
        var details = ["offline: added \(temporary), shown at once: \(shownAtOnce ? "yes" : "no")"]

        let connectivity = ManualConnectivity(isOnline: false)
        let restarted = makeComposer(connectivity: connectivity)
        let shownAfterRestart = (try? await restarted.friendsLoader.load())?.contains { $0.id == temporary } == true
        let nothingSentOffline = server.createRequestCount == creationsBefore
        connectivity.setOnline(true)
        let sent = await eventually { restarted.pendingAdditions?.isMutating == false }
        let serverID = restarted.pendingAdditions?.serverID(for: temporary)
        let onServer = server.friends.filter { $0.name == name }.map(\.id)
        let list = (try? await restarted.friendsLoader.load()) ?? []
        let inList = list.filter { $0.name == name }.map(\.id)
        details.append(
            "online: the server created \(onServer.joined(separator: ", ")); the list shows "
                + inList.joined(separator: ", "))
        let passed =
            shownAtOnce && shownAfterRestart && nothingSentOffline && sent && serverID != nil
            && onServer == [serverID] && inList == [serverID]
        output.row(
            title, source: "network", count: list.count, elapsed: ContinuousClock.now - start, passed: passed,
            note: "one friend, under the server's id")
        for line in details { output.detail(line) }
        return passed
    }

    /// A friend renamed on this device while offline, and on the server by someone else meanwhile: the server answers
    /// the rename with a conflict and its copy. Once with the default answer, a rebase (this device's name, sent again
    /// over the server's copy: the server and the list end with it), once keeping the server's copy (the server keeps
    /// its name, and the list shows it).
    private func renameConflicts(server: FriendsAPIServer) async -> Bool {
        let title = "Rename met a conflict"
        let start = ContinuousClock.now
        var details: [String] = []
        let rebased = await renameConflict(server: server, keeping: .rebase, details: &details)
        let kept = await renameConflict(server: server, keeping: .takeServerCopy, details: &details)
        let passed = rebased && kept
        output.row(
            title, source: "network", count: nil, elapsed: ContinuousClock.now - start, passed: passed,
            note: "a 409 with the server's copy, resolved two ways")
        for line in details { output.detail(line) }
        return passed
    }

    /// One conflict of ``renameConflicts(server:)``, resolved with `resolution`: whether the server and the list end
    /// with the name it keeps.
    private func renameConflict(
        server: FriendsAPIServer, keeping resolution: ConflictResolution<FriendRename>, details: inout [String]
    ) async -> Bool {
        let rebases = if case .rebase = resolution { true } else { false }
        let connectivity = ManualConnectivity(isOnline: false)
        let composer = makeComposer(connectivity: connectivity, resolveRenameConflict: { _ in resolution })
        let onServer = Set(server.friends.map(\.id))
        guard let list = try? await composer.friendsLoader.load(),
            let friend = list.last(where: { onServer.contains($0.id) && !$0.name.hasSuffix(")") })
        else {
            details.append("no friend to rename")
            return false
        }
        let (mine, theirs) = (friend.name + " (mine)", friend.name + " (theirs)")
        guard (try? composer.renameFriend(friend, to: mine)) != nil else {
            details.append("the rename of \(friend.id) could not be saved")
            return false
        }
        let shownAtOnce = (try? await composer.friendsLoader.load())?.first { $0.id == friend.id }?.name == mine
        server.renameOnServer(friend.id, to: theirs)
        let requestsBefore = server.renameRequestCount
        connectivity.setOnline(true)
        let settled = await eventually { composer.pendingRenames?.isMutating == false }
        let expected = rebases ? mine : theirs
        let serverName = server.friends.first { $0.id == friend.id }?.name
        let listName = (try? await composer.friendsLoader.load())?.first { $0.id == friend.id }?.name
        // The conflict, then (for a rebase) the rename sent again against the server's copy.
        let requests = server.renameRequestCount - requestsBefore
        details.append(
            "\(rebases ? "rebase" : "take the server's"): \(friend.id) renamed offline to \"\(mine)\" (shown at once: "
                + "\(shownAtOnce ? "yes" : "no")), on the server to \"\(theirs)\"; the server ends with "
                + "\"\(serverName ?? "nothing")\", the list with \"\(listName ?? "nothing")\" (\(requests) requests)")
        return shownAtOnce && settled && serverName == expected && listName == expected && requests == (rebases ? 2 : 1)
    }

    /// The list a page at a time from `GET /friends?page=N`, to its end.
    private func pages(server: FriendsAPIServer) async -> Bool {
        let start = ContinuousClock.now
        let composer = makeComposer(pageSize: 10)
        guard let pages = composer.friendPages else { return false }
        var sizes: [Int] = []
        var list: PagedList<Friend, Int>?
        while list?.hasNextPage ?? true, sizes.count < 10 {
            guard let loaded = try? await pages.nextPage(of: .all).load().value else { break }
            sizes.append(loaded.pages.last?.page.items.count ?? 0)
            list = loaded
        }
        let passed = list?.items.map(\.id) == server.friends.map(\.id) && list?.hasNextPage == false
        output.row(
            "Pages of the list", source: "network", count: list?.items.count, elapsed: ContinuousClock.now - start,
            passed: passed, note: "pages of \(sizes.map(String.init).joined(separator: ", ")), then the end")
        return passed
    }

    /// A friend renamed on the server (a live update) shows renamed in the list, in the page of the list that holds
    /// it, and on its own (`friend(id:)`): one copy of the friend for all of them.
    private func renamedEverywhere(server: FriendsAPIServer) async -> Bool {
        let title = "Renamed once, shown everywhere"
        let start = ContinuousClock.now
        let composer = makeComposer(pageSize: 10)
        guard let pages = composer.friendPages, let page = try? await pages.nextPage(of: .all).load().value,
            let friend = page.items.last
        else {
            output.failure(title, "the first page did not load")
            return false
        }
        let lists = Locked<[[Friend]]>([])
        let subscription = composer.friendsStream().sink { _ in
        } receiveValue: { list in
            lists.withLock { $0.append(list) }
        }
        defer { subscription.cancel() }
        guard await eventually({ lists.withLock { $0.count } >= 1 }) else {
            output.failure(title, "the list did not load")
            return false
        }
        var edited = friend
        edited.name = friend.name + " (renamed)"
        edited.updatedAt = friend.updatedAt.addingTimeInterval(3_600)
        let renamed = edited
        // Sent again until it arrives (for a minute at most): the composition's event stream opens after its list
        // shows.
        var inList = false
        for _ in 0..<300 where !inList {
            server.push(.upsert(renamed))
            inList = await eventually(timeout: .milliseconds(200)) {
                lists.withLock { $0.last }?.contains(renamed) == true
            }
        }
        let shownPage = try? await pages.store.read(.all, policy: .cacheOnly).load().value
        let inPage = shownPage?.items.contains(renamed) == true
        let alone = (try? await composer.friend(id: friend.id).load()) == renamed
        let passed = inList && inPage && alone
        output.row(
            title, source: "events", count: 1, elapsed: ContinuousClock.now - start, passed: passed,
            note: "\(friend.id) renamed by a live update: in the list \(inList ? "yes" : "no"), in its page "
                + "\(inPage ? "yes" : "no"), on its own \(alone ? "yes" : "no")")
        return passed
    }

    /// Starts this program again as a child that loads the list into a database of its own and says so, kills it
    /// with SIGKILL that moment, then loads from that database as the next launch would.
    private func killedAfterLoad() async -> Bool {
        let title = "Killed right after a load"
        let folder = databaseURL.deletingLastPathComponent().appendingPathComponent("killed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("friends.sqlite")
        let shown: Int
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            shown = try await KillStep.loadInChildThenKill(baseURL: baseURL, databaseURL: database)
        } catch {
            output.failure(title, "\(error)")
            return false
        }
        let relaunched = makeComposer(databaseURL: database)
        let passed = await step("Relaunch after the kill", expect: [.memory: .miss, .database: .hit]) {
            try await relaunched.friendsLoader.load()
        }
        output.detail("a child process showed \(shown) friends and was killed with SIGKILL at once")
        return passed
    }

    /// The app and a widget (a child process) over one database and its change journal: the widget shows the
    /// app's list, then the list without the friend the app deleted, then nothing once the app logged out, without
    /// asking the API; the report says how long each took. The server's list is put back afterwards.
    private func widgetFollowsTheApp(server: FriendsAPIServer) async -> Bool {
        let title = "A widget follows the app"
        let start = ContinuousClock.now
        let folder = databaseURL.deletingLastPathComponent().appendingPathComponent("widget-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("friends.sqlite")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let app = makeComposer(databaseURL: database, changeJournalURL: WidgetStep.journal(beside: database))
        let serverFriends = server.friends
        defer { server.setFriends(serverFriends) }
        guard let list = try? await app.friendsLoader.load(), let victim = list.first?.id else {
            output.failure(title, "the app did not load the list")
            return false
        }
        let outcome = await WidgetStep.run(
            app: app, list: list, victim: victim, baseURL: baseURL, databaseURL: database)
        // How long is reported, not judged: a busy machine is slower, not wrong.
        let passed = outcome.problem == nil && outcome.delete != nil && outcome.logout != nil
        output.row(
            title, source: "database", count: list.count - 1, elapsed: ContinuousClock.now - start, passed: passed,
            note: "a child process showed the app's list, its delete of \(victim) \(Output.describe(outcome.delete)) "
                + "and its logout \(Output.describe(outcome.logout)) after they ended")
        if let problem = outcome.problem { output.detail(problem) }
        return passed
    }

    private func storedFriends() async -> [Friend]? {
        await withCheckedContinuation { continuation in
            SQLiteFriendsStore(fileURL: databaseURL).retrieve { result in
                continuation.resume(returning: (try? result.get())??.friends)
            }
        }
    }

    private func eventually(timeout: Duration = .seconds(60), _ condition: @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    static func friends(count: Int) -> [Friend] {
        let names = [
            "Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra", "Barbara Liskov",
            "Donald Knuth", "Frances Allen", "John McCarthy", "Margaret Hamilton", "Dennis Ritchie", "Radia Perlman",
        ]
        return (0..<count).map { index in
            Friend(
                id: "u\(index + 1)", name: names[index % names.count] + (index >= names.count ? " II" : ""),
                status: [.online, .away, .offline][index % 3],
                avatarURL: URL(string: "https://avatars.example/u\(index + 1).png"),
                updatedAt: Date(timeIntervalSince1970: 1_794_000_000 + Double(index) * 60))
        }
    }
}

/// How a source did in one step.
enum Outcome: String, Sendable {
    case hit, miss
}

/// The composer's events for the current step.
final class EventRecorder: Sendable {
    private let events = Locked<[FriendsComposer.Event]>([])

    var record: @Sendable (FriendsComposer.Event) -> Void { { event in self.events.withLock { $0.append(event) } } }

    func reset() { events.withLock { $0 = [] } }

    func outcomes() -> [FriendsComposer.Source: Outcome] {
        var outcomes: [FriendsComposer.Source: Outcome] = [:]
        for event in events.withLock({ $0 }) {
            switch event {
            case .loaded(let source, _): outcomes[source] = .hit
            case .failed(let source, _): outcomes[source] = .miss
            default: break
            }
        }
        return outcomes
    }

    /// The traced load's steps, one line each: when, what, how long.
    func timeline() -> [String] {
        events.withLock { $0 }.compactMap { event -> String? in
            guard case .traced(let traced) = event else { return nil }
            let at = "+\(Self.milliseconds(traced.elapsed))"
            switch traced.kind {
            case .started: return "\(at) load #\(traced.load) (\(traced.label)) started"
            case .stepStarted(let step): return "\(at) \(step): asked"
            case .stepSucceeded(let step, let duration): return "\(at) \(step): hit in \(Self.milliseconds(duration))"
            case .stepFailed(let step, let error, let duration):
                return "\(at) \(step): miss in \(Self.milliseconds(duration)) (\(error))"
            case .retrying(let attempt, let delay, _): return "\(at) attempt \(attempt) in \(Self.milliseconds(delay))"
            case .succeeded(let duration): return "\(at) done in \(Self.milliseconds(duration))"
            case .failed(let error, let duration): return "\(at) failed in \(Self.milliseconds(duration)): \(error)"
            case .cancelled(let duration): return "\(at) cancelled after \(Self.milliseconds(duration))"
            }
        }
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let value = Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
        return value < 1 ? String(format: "%.2f ms", value) : String(format: "%.0f ms", value)
    }

    func databaseWrites() -> Int {
        events.withLock { $0 }.filter { if case .saved(.database, _) = $0 { return true } else { return false } }.count
    }
}

/// A clock the story moves forward to expire caches.
final class DemoClock: Sendable {
    private let offset = Locked<TimeInterval>(0)

    var now: Date { Date().addingTimeInterval(offset.withLock { $0 }) }

    func advance(by duration: Duration) {
        offset.withLock { $0 += Double(duration.components.seconds) }
    }
}

extension Result {
    var failureDescription: String? {
        if case .failure(let error) = self { return "\(error)" }
        return nil
    }
}
