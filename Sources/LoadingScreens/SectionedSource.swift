import Loading

/// The state of one titled section of a screen: each section loads on its own.
public struct SectionState<Value: Sendable>: Sendable {
    /// The section's title.
    public var title: String
    /// The section's state: each section loads on its own.
    public var state: LoadingState<Value>

    /// Creates a section.
    public init(title: String, state: LoadingState<Value>) {
        self.title = title
        self.state = state
    }
}

extension SectionState: Equatable where Value: Equatable {}

/// Where one titled section's values come from: a stream of values (a loader works too).
public struct TitledSource<Value: Sendable>: Sendable {
    /// The section's title.
    public var title: String
    /// Where the section's values come from.
    public var values: EventStream<Value, any Error>

    /// A section fed by a stream, which may send several values (for example a list with live updates).
    public init(title: String, values: EventStream<Value, any Error>) {
        self.title = title
        self.values = values
    }

    /// A section fed by one load.
    public init<L: Loader>(title: String, loader: L) where L.Output == Value {
        self.init(title: title, values: loader.asStream())
    }
}

/// Combines independent titled sources into ordered sections, each loading on its own: a slow source leaves its
/// section loading while the others show their values, and a failing one fails only its own section. A
/// composite data source, for any screen.
///
/// ```swift
/// let sections = SectionedSource([
///     TitledSource(title: "Online", loader: friends.map { $0.filter { $0.status == .online } }),
///     TitledSource(title: "All friends", loader: friends),
/// ])
/// let subscription = sections.sections.sink { sections in render(sections) }
/// ```
/// The sections share one value type and one stream. For sections of different types, or to reload one section
/// alone, give each section its own ``ResourceModel`` (the Screens article shows a screen built that way).
public struct SectionedSource<Value: Sendable>: Sendable {
    private let sources: [TitledSource<Value>]

    /// Creates the composite, in the order the sections appear.
    public init(_ sources: [TitledSource<Value>]) {
        self.sources = sources
    }

    /// The sections: first all loading, then a new array every time one section's state changes. Finishes when
    /// every source has finished; never fails (failures live in the sections).
    public var sections: EventStream<[SectionState<Value>], Never> {
        let initial = sources.map { SectionState<Value>(title: $0.title, state: .loading(previous: nil)) }
        let changes = EventStream<(index: Int, result: Result<Value, any Error>), Never>.merge(
            sources.enumerated().map { index, source in
                source.values
                    .map { (index: index, result: Result<Value, any Error>.success($0)) }
                    .catch { .just((index: index, result: .failure($0))) }
            })
        let updates = changes.scan(initial) { sections, change in
            var sections = sections
            sections[change.index].state = sections[change.index].state.finishingLoad(with: change.result)
            return sections
        }
        return EventStream<[SectionState<Value>], Never>.just(initial).merge(with: updates)
    }
}
