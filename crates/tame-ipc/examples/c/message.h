/* The message both examples agree on: 16 bytes, 8-byte aligned. */
#ifndef EXAMPLE_MESSAGE_H
#define EXAMPLE_MESSAGE_H
#include <stdint.h>

struct message {
    uint64_t seq;
    uint64_t square; /* seq * seq, so the consumer can check the payload */
};

#define RING_CAPACITY 1024
#endif
