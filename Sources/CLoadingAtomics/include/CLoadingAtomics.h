#ifndef CLOADING_ATOMICS_H
#define CLOADING_ATOMICS_H

#include <stdint.h>

/// Atomic operations on a word, for the few flags Loading reads on every event without taking a lock.
/// Header-only: the functions inline into Swift callers. Writers still hold the owning lock, except for the
/// compare-and-swap that ends a delivery turn; the atomic stores pair with the atomic loads (acquire/release), so
/// no read is a data race.

static inline intptr_t loading_atomic_load_acquire(const intptr_t *address) {
    return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

static inline void loading_atomic_store_release(intptr_t *address, intptr_t value) {
    __atomic_store_n(address, value, __ATOMIC_RELEASE);
}

static inline intptr_t loading_atomic_fetch_add(intptr_t *address, intptr_t value) {
    return __atomic_fetch_add(address, value, __ATOMIC_ACQ_REL);
}

static inline _Bool loading_atomic_compare_exchange(intptr_t *address, intptr_t expected, intptr_t desired) {
    return __atomic_compare_exchange_n(address, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

#endif
