#ifndef CLOADING_ATOMICS_H
#define CLOADING_ATOMICS_H

#include <stdint.h>

/// Atomic loads and stores on a word, for the few flags Loading reads on every event without taking a lock.
/// Header-only: the functions inline into Swift callers. Writers still hold the owning lock; the atomic store
/// pairs with the lock-free atomic load (acquire/release), so the read is not a data race.

static inline intptr_t loading_atomic_load_acquire(const intptr_t *address) {
    return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

static inline void loading_atomic_store_release(intptr_t *address, intptr_t value) {
    __atomic_store_n(address, value, __ATOMIC_RELEASE);
}

#endif
