/// Stores `newValue` in `value` and returns what was there: how a lock-protected state hands what it drops to the
/// caller, to be released after unlocking (releasing may run deinitializers, which must not run under the lock).
@inlinable
func exchange<T>(_ value: inout T, with newValue: T) -> T {
    var old = newValue
    swap(&value, &old)
    return old
}
