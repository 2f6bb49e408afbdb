/* Creates a ring, a register and an event named after argv[1], consumes argv[2]
 * messages, checks their order and payload, reads the producer's latest status from
 * the register, then removes the segments.
 *
 *   consumer NAME COUNT      (start the producer with the same NAME and COUNT)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tame_ipc.h"
#include "message.h"

static int fail(const char *what, tame_ipc_result r) {
    char detail[512];
    tame_ipc_last_error(detail, sizeof detail);
    fprintf(stderr, "consumer: %s: %s: %s\n", what, tame_ipc_result_name(r), detail);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: consumer NAME COUNT\n");
        return 2;
    }
    const char *name = argv[1];
    uint64_t count = strtoull(argv[2], NULL, 10);
    char reg_name[256], event_name[256];
    snprintf(reg_name, sizeof reg_name, "%s.status", name);
    snprintf(event_name, sizeof event_name, "%s.done", name);

    tame_ipc_ring *ring = NULL;
    tame_ipc_consumer *consumer = NULL;
    tame_ipc_register *reg = NULL;
    tame_ipc_reader *reader = NULL;
    tame_ipc_event *event = NULL;
    tame_ipc_listener *listener = NULL;
    tame_ipc_result r;

    if ((r = tame_ipc_ring_create(name, sizeof(struct message), _Alignof(struct message), RING_CAPACITY, 0, &ring)))
        return fail("ring_create", r);
    if ((r = tame_ipc_register_create(reg_name, sizeof(uint64_t), _Alignof(uint64_t), 0, &reg)))
        return fail("register_create", r);
    if ((r = tame_ipc_event_create(event_name, 0, &event)))
        return fail("event_create", r);
    /* Creating twice is refused and changes nothing. */
    tame_ipc_ring *again = NULL;
    r = tame_ipc_ring_create(name, sizeof(struct message), _Alignof(struct message), RING_CAPACITY, 0, &again);
    if (r != TAME_IPC_ERR_EXISTS || again != NULL)
        return fail("second ring_create should be refused", r);
    /* A capacity that is not a power of two is refused. */
    r = tame_ipc_ring_create_anonymous(8, 8, 1000, &again);
    if (r != TAME_IPC_ERR_INVALID_ARGUMENT)
        return fail("capacity 1000 should be refused", r);

    if ((r = tame_ipc_consumer_open(ring, &consumer)))
        return fail("consumer_open", r);
    if ((r = tame_ipc_reader_open(reg, &reader)))
        return fail("reader_open", r);
    if ((r = tame_ipc_listener_open(event, &listener)))
        return fail("listener_open", r);
    printf("READY\n");
    fflush(stdout);

    struct message batch[64];
    uint64_t expected = 0;
    time_t deadline = time(NULL) + 60;
    while (expected < count) {
        size_t popped = 0;
        if ((r = tame_ipc_consumer_pop_many(consumer, batch, 64, &popped)))
            return fail("pop_many", r);
        if (popped == 0) {
            /* Nothing in a batch: wait on the next message in place. */
            const void *slot = NULL;
            r = tame_ipc_consumer_peek(consumer, &slot);
            if (r == TAME_IPC_EMPTY) {
                if (time(NULL) > deadline) {
                    fprintf(stderr, "consumer: timed out after %llu messages\n", (unsigned long long)expected);
                    return 1;
                }
                continue;
            }
            if (r != TAME_IPC_OK)
                return fail("peek", r);
            memcpy(&batch[0], slot, sizeof batch[0]);
            if ((r = tame_ipc_consumer_release(consumer)))
                return fail("release", r);
            popped = 1;
        }
        for (size_t i = 0; i < popped; i++, expected++) {
            if (batch[i].seq != expected || batch[i].square != expected * expected) {
                fprintf(stderr, "consumer: message %llu out of order or damaged (seq %llu)\n",
                        (unsigned long long)expected, (unsigned long long)batch[i].seq);
                return 1;
            }
        }
    }

    uint32_t events = 0;
    r = tame_ipc_listener_wait(listener, 10ull * 1000 * 1000 * 1000, &events);
    if (r != TAME_IPC_OK || events != 1)
        return fail("waiting for the done event", r);
    uint64_t status = 0, version = 0;
    int fresh = 0;
    if ((r = tame_ipc_reader_read(reader, &status, &fresh, &version)))
        return fail("reader_read", r);
    if (status != count || !fresh) {
        fprintf(stderr, "consumer: register says %llu (fresh %d), expected %llu\n",
                (unsigned long long)status, fresh, (unsigned long long)count);
        return 1;
    }
    /* The producer releases its role when it closes its handle; wait (bounded) for that. */
    uint32_t pid = 0;
    int peer = tame_ipc_consumer_peer_state(consumer, &pid);
    for (deadline = time(NULL) + 10; peer == TAME_IPC_PEER_ALIVE && time(NULL) <= deadline;)
        peer = tame_ipc_consumer_peer_state(consumer, &pid);
    printf("received %llu messages; register %llu after %llu writes; producer state %d\n",
           (unsigned long long)expected, (unsigned long long)status, (unsigned long long)version, peer);

    tame_ipc_listener_close(listener);
    tame_ipc_event_close(event);
    tame_ipc_reader_close(reader);
    tame_ipc_register_close(reg);
    tame_ipc_consumer_close(consumer);
    tame_ipc_ring_close(ring);
    tame_ipc_unlink(name);
    tame_ipc_unlink(reg_name);
    tame_ipc_unlink(event_name);
    return 0;
}
