/* Loaded into a program started by `tame run --mlock` (LD_PRELOAD). Memory locking does not
 * survive execve, so it must happen inside the new program, before main(): lock all current and
 * future pages, then touch the stack (and, if asked, a heap area) so the first real-time
 * iteration takes no page fault. Failures are reported on stderr and do not stop the program.
 *
 * It is for the process tame started only, through every image it execs (a wrapper script that
 * execs the real program keeps the lock): the first image notes its pid (TAME_PRELOAD_PID). Loaded
 * into any other process (a child, which inherited the environment and the memfd), it locks
 * nothing, closes the memfd (TAME_PRELOAD_FD) and takes itself out of the environment (its
 * LD_PRELOAD entry, TAME_*), so that process's own children see none of it. */
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

/* Remove the entry `self` from LD_PRELOAD (entries are separated by spaces or colons). */
static void drop_preload_entry(const char *self) {
    const char *list = getenv("LD_PRELOAD");
    if (!list)
        return;
    size_t self_len = strlen(self);
    char *kept = malloc(strlen(list) + 1);
    if (!kept) {
        unsetenv("LD_PRELOAD");
        return;
    }
    size_t out = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, " :");
        if (n > 0 && !(n == self_len && strncmp(p, self, n) == 0)) {
            if (out > 0)
                kept[out++] = ' ';
            memcpy(kept + out, p, n);
            out += n;
        }
        p += n;
        if (*p)
            p++;
    }
    kept[out] = '\0';
    if (out > 0)
        setenv("LD_PRELOAD", kept, 1);
    else
        unsetenv("LD_PRELOAD");
    free(kept);
}

/* In a process other than the one tame started: leave nothing for its children. */
static void forget_ourselves(void) {
    const char *fd_text = getenv("TAME_PRELOAD_FD");
    if (fd_text) {
        char *end = NULL;
        long fd = strtol(fd_text, &end, 10);
        if (end && *end == '\0' && fd > 2) {
            char self[64];
            snprintf(self, sizeof self, "/proc/self/fd/%ld", fd);
            drop_preload_entry(self);
            close((int)fd); /* the library stays mapped */
        }
    }
    unsetenv("TAME_PRELOAD_FD");
    unsetenv("TAME_PRELOAD_PID");
    unsetenv("TAME_MLOCK");
    unsetenv("TAME_PREFAULT_BYTES");
}

/* True in the process tame started (in any image it execs), false in any other. */
static int in_started_process(void) {
    char me[32];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    const char *started = getenv("TAME_PRELOAD_PID");
    if (!started) {
        setenv("TAME_PRELOAD_PID", me, 1);
        return 1;
    }
    return strcmp(started, me) == 0;
}

__attribute__((constructor)) static void tame_preload_lock(void) {
    if (!in_started_process()) {
        forget_ourselves();
        return;
    }
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
