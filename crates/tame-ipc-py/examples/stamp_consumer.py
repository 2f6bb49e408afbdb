"""A Python consumer of crates/tame-ipc/examples/stamp_producer's stamps.

    python stamp_consumer.py (--name NAME | --fd N) [--capacity 1024] --count N
        [--timeout-s 30] [--sleep-us 0] [--latency-out FILE]

Opens the ring, prints READY once it holds the consumer role, then pops batches into
a preallocated numpy array (``pop_into``: no allocation per message) until COUNT
attempts are accounted for, or the ring is empty and the producer, seen alive
before, is gone (its last attempts may have been refused, which no later stamp
reports; ``producer_state`` is checked every 10 ms of emptiness), checking every stamp (stamps.Tracker) and measuring
one-way latency (CLOCK_MONOTONIC now minus the stamp's). Between empty polls it spins,
or sleeps SLEEP_US. Prints ``received R reported_full F`` and the percentiles; with
--latency-out writes each latency (ns) on a line. Exit 1 when a check fails or time runs out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamps import STAMP, Tracker, monotonic_ns, percentiles  # noqa: E402

import tame_ipc  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--name")
    where.add_argument("--fd", type=int)
    parser.add_argument("--capacity", type=int, default=1024)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--timeout-s", type=float, default=30)
    parser.add_argument("--sleep-us", type=int, default=0)
    parser.add_argument("--latency-out")
    args = parser.parse_args()

    shape = dict(elem_align=STAMP.alignment)
    if args.name is not None:
        ring = tame_ipc.Ring.open(args.name, STAMP.itemsize, args.capacity, **shape)
    else:
        ring = tame_ipc.Ring.from_fd(args.fd, STAMP.itemsize, args.capacity, **shape)
    rx = ring.consumer()
    print("READY", flush=True)

    batch = np.zeros(64, dtype=STAMP)
    latencies = np.zeros(args.count, dtype=np.int64)
    tracker = Tracker()
    deadline = time.monotonic() + args.timeout_s
    sleep = args.sleep_us / 1e6
    seen_alive, next_check = False, 0.0
    while tracker.accounted < args.count:
        n = rx.pop_into(batch)
        if n:
            now = monotonic_ns()
            got = batch[:n]
            latencies[tracker.received : tracker.received + n] = now - got["sent_ns"].astype(np.int64)
            tracker.accept(got)
            continue
        if time.monotonic() > next_check:
            state = rx.producer_state().state
            if state == "alive":
                seen_alive = True
            elif seen_alive and state in ("absent", "dead") and len(rx) == 0:
                break
            next_check = time.monotonic() + 0.01
        if time.monotonic() > deadline:
            print(f"error: timed out: received {tracker.received}, producer {rx.producer_state()!r}", file=sys.stderr)
            return 1
        if sleep:
            time.sleep(sleep)
    latencies = latencies[: tracker.received]
    print(f"received {tracker.received} reported_full {tracker.reported_full}")
    print(" ".join(f"{k} {v:.0f}" for k, v in percentiles(latencies).items()))
    if args.latency_out:
        Path(args.latency_out).write_text("".join(f"{ns}\n" for ns in latencies.tolist()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
