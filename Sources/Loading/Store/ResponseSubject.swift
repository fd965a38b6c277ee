/// What a store shows for one key, sent to the key's observers (``Store/changes(for:)``): the latest response to
/// each new observer, then every newer one. A subject over the responses' storage, which is an object already, so
/// that keeping the latest response boxes nothing; not generic, so it is compiled once in `Loading`.
@usableFromInline
final class ResponseSubject: Sendable {
    private typealias Observer = SubjectBox<StreamObserver<StoreResponse<any StoreValueBox>, Never>>

    private let core = SubjectCore(current: nil)

    /// Creates a subject with no response yet.
    init() {}

    /// The latest response, then every newer one.
    @usableFromInline
    var stream: EventStream<StoreResponse<any StoreValueBox>, Never> {
        EventStream { [core] observer in
            switch core.subscribe(Observer(observer), replayingCurrent: true) {
            case .completed:
                observer.finish()
            case .added(let id, let replay):
                observer.onTermination { [weak core] in core?.remove(id) }
                if let replay { core.deliver(replay, through: { Self.deliver($0, own: nil) }) }
            }
        }
    }

    /// Sends `response` unless the latest response sent is as new (by version): publishes from several threads may
    /// arrive out of order.
    func send(_ response: StoreResponse<any StoreValueBox>) {
        let storage = response.storage
        core.replace(
            with: storage, unlessCurrent: { ($0 as! StoreResponseStorage).version >= storage.version },
            through: { Self.deliver($0, own: storage) })
    }

    private static func deliver(_ broadcast: SubjectCore.Broadcast, own: StoreResponseStorage?) {
        guard let storage = broadcast.object.map({ $0 as! StoreResponseStorage }) ?? own else {
            preconditionFailure("A store's subject delivered the response of a caller that sent none")
        }
        let event = StreamEvent<StoreResponse<any StoreValueBox>, Never>.value(StoreResponse(storage: storage))
        broadcast.forEachRecipient { ($0 as! Observer).boxed.receive(event) }
    }
}

extension StoreResponse {
    fileprivate init(storage: StoreResponseStorage) {
        self.storage = storage
    }
}
