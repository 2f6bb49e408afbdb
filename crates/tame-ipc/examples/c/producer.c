/* Opens the ring, register and event created by `consumer NAME COUNT`, pushes COUNT
 * messages, publishes progress in the register and signals the event when done.
 *
 *   producer NAME COUNT
 */
#include <stdio.h>
#include <stdlib.h>

#include "tame_ipc.h"
#include "message.h"

static int fail(const char *what, tame_ipc_result r) {
    char detail[512];
    tame_ipc_last_error(detail, sizeof detail);
    fprintf(stderr, "producer: %s: %s: %s\n", what, tame_ipc_result_name(r), detail);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: producer NAME COUNT\n");
        return 2;
    }
    const char *name = argv[1];
    uint64_t count = strtoull(argv[2], NULL, 10);
    char reg_name[256], event_name[256];
    snprintf(reg_name, sizeof reg_name, "%s.status", name);
    snprintf(event_name, sizeof event_name, "%s.done", name);

    tame_ipc_ring *ring = NULL;
    tame_ipc_producer *producer = NULL;
    tame_ipc_register *reg = NULL;
    tame_ipc_writer *writer = NULL;
    tame_ipc_event *event = NULL;
    tame_ipc_result r;

    /* The wrong shape is refused with a distinct code. */
    r = tame_ipc_ring_open(name, sizeof(struct message), _Alignof(struct message), RING_CAPACITY * 2, &ring);
    if (r != TAME_IPC_ERR_LAYOUT_MISMATCH)
        return fail("opening with the wrong capacity should be refused", r);

    if ((r = tame_ipc_ring_open(name, sizeof(struct message), _Alignof(struct message), RING_CAPACITY, &ring)))
        return fail("ring_open", r);
    if ((r = tame_ipc_register_open(reg_name, sizeof(uint64_t), _Alignof(uint64_t), &reg)))
        return fail("register_open", r);
    if ((r = tame_ipc_event_open(event_name, &event)))
        return fail("event_open", r);
    if ((r = tame_ipc_producer_open(ring, &producer)))
        return fail("producer_open", r);
    /* Only one producer per ring. */
    tame_ipc_producer *second = NULL;
    r = tame_ipc_producer_open(ring, &second);
    if (r != TAME_IPC_ERR_ROLE_TAKEN)
        return fail("a second producer should be refused", r);
    if ((r = tame_ipc_writer_open(reg, &writer)))
        return fail("writer_open", r);
    uint32_t pid = 0;
    if (tame_ipc_producer_peer_state(producer, &pid) != TAME_IPC_PEER_ALIVE) {
        fprintf(stderr, "producer: the consumer should be alive\n");
        return 1;
    }

    for (uint64_t seq = 0; seq < count;) {
        if (seq % 2 == 0) {
            /* Copied in from a finished message... */
            struct message m = {seq, seq * seq};
            r = tame_ipc_producer_push(producer, &m);
        } else {
            /* ...or built in place in the reserved slot, then published. */
            void *slot = NULL;
            r = tame_ipc_producer_reserve(producer, &slot);
            if (r == TAME_IPC_OK) {
                struct message *m = slot;
                m->seq = seq;
                m->square = seq * seq;
                r = tame_ipc_producer_commit(producer);
            }
        }
        if (r == TAME_IPC_FULL)
            continue;
        if (r != TAME_IPC_OK)
            return fail("push or reserve/commit", r);
        seq++;
        if (seq % 1024 == 0 || seq == count)
            tame_ipc_writer_write(writer, &seq);
    }
    if ((r = tame_ipc_event_signal_and_wake(event)))
        return fail("signal", r);
    printf("sent %llu messages\n", (unsigned long long)count);

    tame_ipc_writer_close(writer);
    tame_ipc_producer_close(producer);
    tame_ipc_event_close(event);
    tame_ipc_register_close(reg);
    tame_ipc_ring_close(ring);
    return 0;
}
