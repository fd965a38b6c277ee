#ifndef CHEAPSTATS_H
#define CHEAPSTATS_H
#include <stddef.h>

/// Bytes the allocator has handed out and not had back (glibc's mallinfo2 uordblks); 0 where unknown.
size_t heap_bytes_in_use(void);

#endif
