/// What a ``MutationQueue`` knows of the items its mutations name: the mutations naming each item, by the item's id
/// (learned from what ``OfflineCreation``'s `replacingIDs` asks), and the ids the server gave the items created
/// offline. A creation's answer rewrites, and its refusal takes out, only the mutations naming its item.
struct NamedItems: Sendable {
    /// How many server ids are kept: the oldest is forgotten past it.
    static let serverIDLimit = 1_000

    private var naming: [String: Set<String>] = [:]
    private var serverIDs: [String: String] = [:]
    /// The temporary ids in the order they were given a server id, from `head` on.
    private var order: [String] = []
    private var head = 0
    /// Counts the server ids given (and the clears), for an enqueue to tell whether it rewrote its input with the
    /// latest ones.
    private(set) var version = 0

    /// The server ids given so far, by temporary id.
    var known: [String: String] { serverIDs }

    /// The server id given to temporary id `temporary`, if it is known still.
    func serverID(for temporary: String) -> String? {
        serverIDs[temporary]
    }

    /// The mutations naming the item `id`.
    func mutations(naming id: String) -> Set<String> {
        naming[id] ?? []
    }

    /// Mutation `mutation` names the items `names`.
    mutating func add(_ mutation: String, naming names: [String]) {
        for name in names { naming[name, default: []].insert(mutation) }
    }

    /// Mutation `mutation`, which named the items `names`, left the queue.
    mutating func remove(_ mutation: String, naming names: [String]) {
        for name in names { remove(mutation, from: name) }
    }

    /// Mutation `mutation` names `server` from now on, instead of `temporary`.
    mutating func rename(_ mutation: String, from temporary: String, to server: String) {
        remove(mutation, from: temporary)
        naming[server, default: []].insert(mutation)
    }

    /// The server gave temporary id `temporary` the id `server`.
    mutating func assign(_ server: String, to temporary: String) {
        version += 1
        guard serverIDs.updateValue(server, forKey: temporary) == nil else { return }
        order.append(temporary)
        guard serverIDs.count > Self.serverIDLimit else { return }
        serverIDs[order[head]] = nil
        head += 1
        if head >= Self.serverIDLimit {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Forgets every mutation and every server id (a logout).
    mutating func removeAll() {
        self = NamedItems(version: version + 1)
    }

    private init(version: Int) {
        self.version = version
    }

    init() {}

    private mutating func remove(_ mutation: String, from name: String) {
        naming[name]?.remove(mutation)
        if naming[name]?.isEmpty == true { naming[name] = nil }
    }
}
