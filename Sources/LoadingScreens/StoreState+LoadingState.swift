import Loading

extension StoreState {
    /// The state as a screen shows it: loading while the store fetches the key (keeping the value shown), failed
    /// after a failure (keeping it), loaded with a value, idle with none.
    public var loadingState: LoadingState<Value> {
        let value = self.value
        if isLoading { return .loading(previous: value) }
        if let error { return .failed(error, previous: value) }
        if let value { return .loaded(value) }
        return .idle
    }
}
