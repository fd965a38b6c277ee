/// A value, completion or observer kept by ``SubjectCore``, given back its type by the subject's face.
@usableFromInline
final class SubjectBox<Boxed: Sendable>: Sendable {
    @usableFromInline
    let boxed: Boxed

    @inlinable
    init(_ boxed: Boxed) {
        self.boxed = boxed
    }
}

// The subjects' generic face over their core: what runs for each event is inlined where `Output` and `Failure` are
// known, so that what the core keeps as objects is opened with a class cast, without a run-time look-up of a generic
// type. Subscribing, once per subscriber, is compiled once.
extension SubjectCore {
    /// Broadcasts `event` to the current subscribers; ignored after the subject completed.
    @inlinable
    func send<Output: Sendable, Failure: Error>(_ event: StreamEvent<Output, Failure>) {
        switch event {
        case .value(let value):
            send({ SubjectBox(value) }, isCompletion: false, through: { Self.deliver($0, own: event) })
        case .completion(let completion):
            send({ SubjectBox(completion) }, isCompletion: true, through: { Self.deliver($0, own: event) })
        }
    }

    /// Replaces the current value with `transform(current)` and broadcasts it, atomically with respect to every
    /// other send (a compare-and-set: `transform` runs outside the lock and again if another send came first); does
    /// nothing when `transform` returns `nil` or the subject completed. Returns the value sent.
    func update<Output: Sendable, Failure: Error>(
        _ transform: (Output) -> Output?,
        failing: Failure.Type
    ) -> Output? {
        while true {
            guard let (current, sequence) = currentWithSequence(), let current,
                let next = transform((current as! SubjectBox<Output>).boxed)
            else { return nil }
            let event = StreamEvent<Output, Failure>.value(next)
            if replace(at: sequence, with: SubjectBox(next), through: { Self.deliver($0, own: event) }) {
                return next
            }
        }
    }

    /// Adds `observer`; replays the current value first when `replayingCurrent`; after completion, sends only the
    /// completion.
    func subscribe<Output: Sendable, Failure: Error>(
        _ observer: StreamObserver<Output, Failure>,
        replayingCurrent: Bool
    ) {
        switch subscribe(SubjectBox(observer), replayingCurrent: replayingCurrent) {
        case .completed(let completion):
            observer.send(completion: (completion as! SubjectBox<StreamCompletion<Failure>>).boxed)
        case .added(let id, let replay):
            observer.onTermination { [weak self] in self?.remove(id) }
            if let replay { deliver(replay, through: { Self.deliver($0, own: StreamEvent<Output, Failure>?.none) }) }
        }
    }

    /// Delivers one event to its recipients, giving it its type: `own` is the event of the caller delivering, when it
    /// sent one.
    @inlinable
    static func deliver<Output: Sendable, Failure: Error>(_ broadcast: Broadcast, own: StreamEvent<Output, Failure>?) {
        let event: StreamEvent<Output, Failure>
        if let object = broadcast.object {
            event =
                broadcast.isCompletion
                ? .completion((object as! SubjectBox<StreamCompletion<Failure>>).boxed)
                : .value((object as! SubjectBox<Output>).boxed)
        } else if let own {
            event = own
        } else {
            preconditionFailure("A subject's delivery carried the event of a caller that sent none")
        }
        broadcast.forEachRecipient { observer in
            (observer as! SubjectBox<StreamObserver<Output, Failure>>).boxed.receive(event)
        }
    }
}
