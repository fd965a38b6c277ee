extension StoreEngine {
    /// Another process changed `key` in level `level`, which they share: reads what the level holds now and shows it,
    /// confirmed for the faster levels only (the shared level is not written back). Nothing is read while a change of
    /// the key runs or a clear empties the levels, nor while the store's own writes of the key to that level are not
    /// issued yet: what they hold is newer, and their save tells the other processes in turn.
    func learnExternalChange(of key: StoreKeyRef, level: Int) {
        let begun = run(key) { $0.beginLevelRead($1, level: level) }
        guard case .read(let stamp, let inStep) = begun else { return }
        guard inStep else {
            _ = run(key) { $0.endLevelRead($1) }
            return
        }
        _ = levels[level].read(key.object) { [self] result in
            switch result {
            case .success(let cached): submit(.external(cached, level: level, stamp: stamp), of: key)
            case .failure(is CacheMiss): submit(.external(nil, level: level, stamp: stamp), of: key)
            case .failure: _ = run(key) { $0.endLevelRead($1) }  // a level that failed says nothing of what it holds
            }
        }
    }
}
