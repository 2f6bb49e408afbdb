/* Loaded into a program started by `tame run --mlock` (LD_PRELOAD). Memory locking does not
 * survive execve, so it must happen inside the new program, before main(): lock all current and
 * future pages, then touch the stack (and, if asked, a heap area) so the first real-time
 * iteration takes no page fault. Failures are reported on stderr and do not stop the program. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STACK_PREFAULT (256 * 1024)

static void touch_stack(void) {
    volatile char area[STACK_PREFAULT];
    long page = sysconf(_SC_PAGESIZE);
    for (long i = 0; i < STACK_PREFAULT; i += page)
        area[i] = 1;
    (void)area[0]; /* volatile stores are kept; this read marks the array used */
}

__attribute__((constructor)) static void tame_preload_lock(void) {
    const char *want = getenv("TAME_MLOCK");
    if (!want || strcmp(want, "1") != 0)
        return;
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        fprintf(stderr, "tame: mlockall failed in %d: %s\n", (int)getpid(), strerror(errno));
        return;
    }
    touch_stack();
    const char *heap = getenv("TAME_PREFAULT_BYTES");
    if (heap) {
        size_t bytes = strtoull(heap, NULL, 10);
        if (bytes > 0) {
            /* Keep freed memory in the heap (no trimming, no per-allocation mmap), fault
             * the pages in and hand them back to malloc's free list: locked by MCL_FUTURE,
             * later allocations up to this size take no page fault. */
            mallopt(M_TRIM_THRESHOLD, -1);
            mallopt(M_MMAP_MAX, 0);
            char *p = malloc(bytes);
            if (p) {
                memset(p, 0, bytes);
                free(p);
            }
        }
    }
}
