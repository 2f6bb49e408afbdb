/* Victim of a hostile peer, for tests/it/c_examples.rs: opens the ring NAME as consumer
 * and the register NAME.status read-only, says READY, waits for a line on stdin
 * (meanwhile the peer truncates both files to 0), then keeps using them. Without the
 * library's SIGBUS guard the first access after the truncation kills it.
 *
 *   shrink_victim NAME
 */
#include <stdio.h>
#include <string.h>

#include "tame_ipc.h"

static int fail(const char *what, tame_ipc_result r) {
    char detail[512];
    tame_ipc_last_error(detail, sizeof detail);
    fprintf(stderr, "shrink_victim: %s: %s: %s\n", what, tame_ipc_result_name(r), detail);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: shrink_victim NAME\n");
        return 2;
    }
    char status_name[256];
    snprintf(status_name, sizeof status_name, "%s.status", argv[1]);
    tame_ipc_ring *ring = NULL;
    tame_ipc_consumer *consumer = NULL;
    tame_ipc_register *status = NULL;
    tame_ipc_reader *reader = NULL;
    tame_ipc_writer *writer = NULL;
    tame_ipc_result r;
    if ((r = tame_ipc_ring_open(argv[1], 8, 8, 64, &ring)))
        return fail("ring_open", r);
    if ((r = tame_ipc_consumer_open(ring, &consumer)))
        return fail("consumer_open", r);
    if ((r = tame_ipc_register_open_read_only(status_name, 8, 8, &status)))
        return fail("register_open_read_only", r);
    if ((r = tame_ipc_reader_open(status, &reader)))
        return fail("reader_open", r);
    r = tame_ipc_writer_open(status, &writer);
    if (r != TAME_IPC_ERR_PERMISSION || writer != NULL)
        return fail("a writer on a read-only register should be refused", r);
    uint64_t value = 0, version = 0;
    int fresh = 0;
    if ((r = tame_ipc_consumer_pop(consumer, &value)) || value != 1)
        return fail("first pop", r);
    if ((r = tame_ipc_reader_read(reader, &value, &fresh, &version)) || value != 7)
        return fail("first read", r);
    printf("READY\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    int ok = 0, empty = 0, corrupted = 0;
    for (int i = 0; i < 1000; i++) {
        r = tame_ipc_consumer_pop(consumer, &value);
        ok += r == TAME_IPC_OK;
        empty += r == TAME_IPC_EMPTY;
        corrupted += r == TAME_IPC_ERR_CORRUPTED;
    }
    r = tame_ipc_reader_read(reader, &value, &fresh, &version);
    printf("SURVIVED lost=%d %d popped=%d empty=%d corrupted=%d read=%s\n",
           tame_ipc_ring_lost(ring), tame_ipc_register_lost(status), ok, empty, corrupted,
           tame_ipc_result_name(r));
    tame_ipc_reader_close(reader);
    tame_ipc_register_close(status);
    tame_ipc_consumer_close(consumer);
    tame_ipc_ring_close(ring);
    return 0;
}
