import CLoadingAtomics

/// Whose turn it is to deliver, for the types that let several threads send and one deliver at a time (the
/// subjects, the serialized observer): one word, read and written atomically, so that the deliverer ends its turn
/// without taking the owner's lock again when nothing was queued meanwhile (the common case: one lock per event).
///
/// The word is `1 + 2 × (events queued since the deliverer last took the queue)` during a turn and 0 between turns.
/// Senders change it only under the owner's lock, which also guards the queue; the deliverer ends its turn with a
/// compare-and-swap from 1 to 0, which fails if a sender queued something, and then drains the queue under the lock.
/// `@unchecked Sendable` because its one mutable word is only ever accessed atomically.
final class DeliveryTurn: @unchecked Sendable {
    private let word: UnsafeMutablePointer<Int>

    init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit {
        word.deallocate()
    }

    /// Under the owner's lock, for a sender: `true` when the caller takes the turn and delivers its event now;
    /// `false` when a turn is running and the caller must queue its event for the deliverer.
    func take() -> Bool {
        guard loading_atomic_fetch_add(word, 2) & 1 == 0 else { return false }
        // Nobody was delivering (the word was 0), and senders hold the lock: the turn is the caller's.
        loading_atomic_store_release(word, 1)
        return true
    }

    /// Without the lock, for the deliverer after a delivery: `true` when nothing was queued meanwhile and the turn
    /// is over; `false` when the deliverer must take the queue (under the lock) and go on.
    func end() -> Bool {
        loading_atomic_compare_exchange(word, 1, 0)
    }

    /// Under the owner's lock, for the deliverer taking the queue: the turn goes on, with nothing queued.
    func keep() {
        loading_atomic_store_release(word, 1)
    }

    /// Under the owner's lock, for the deliverer that found nothing to take: the turn is over.
    func pass() {
        loading_atomic_store_release(word, 0)
    }
}
