import Loading

/// What a screen shows for a resource: nothing yet, loading, the loaded value, or a failure, keeping the last value
/// while refreshing and after a failed refresh so the screen never blanks.
///
/// ```swift
/// switch state {
/// case .idle: showPlaceholder()
/// case .loading(let previous): showSpinner(over: previous)
/// case .loaded(let friends): show(friends)
/// case .failed(let error, let previous): show(previous, banner: error)
/// }
/// ```
public enum LoadingState<Value: Sendable>: Sendable {
    /// Nothing was asked yet (or everything was wiped).
    case idle
    /// A load is in flight; `previous` is the value shown until it finishes, if there is one.
    case loading(previous: Value?)
    /// The latest load succeeded.
    case loaded(Value)
    /// The latest load failed; `previous` is the last value that loaded, if any.
    case failed(any Error, previous: Value?)

    /// The value to show: the loaded one, or the previous one while loading or after a failure.
    public var value: Value? {
        switch self {
        case .idle: nil
        case .loading(let previous): previous
        case .loaded(let value): value
        case .failed(_, let previous): previous
        }
    }

    /// Whether a load is in flight.
    public var isLoading: Bool {
        if case .loading = self { return true }
        return false
    }

    /// The error of the latest load, if it failed.
    public var error: (any Error)? {
        if case .failed(let error, _) = self { return error }
        return nil
    }

    /// The state once a load starts from this one: loading, keeping the value shown.
    public func startingLoad() -> LoadingState {
        .loading(previous: value)
    }

    /// The state once a load finishes with `result`: the new value, or the failure keeping the value shown.
    public func finishingLoad(with result: Result<Value, any Error>) -> LoadingState {
        switch result {
        case .success(let value): .loaded(value)
        case .failure(let error): .failed(error, previous: self.value)
        }
    }
}

extension LoadingState: Equatable where Value: Equatable {
    /// Two states are equal when their cases and values are; two failures also need errors of the same type that
    /// describe themselves the same way (errors are not `Equatable` in general).
    public static func == (lhs: LoadingState, rhs: LoadingState) -> Bool {
        switch (lhs, rhs) {
        case (.idle, .idle): true
        case (.loading(let a), .loading(let b)): a == b
        case (.loaded(let a), .loaded(let b)): a == b
        case (.failed(let e1, let a), .failed(let e2, let b)):
            a == b && type(of: e1) == type(of: e2) && String(reflecting: e1) == String(reflecting: e2)
        default: false
        }
    }
}
