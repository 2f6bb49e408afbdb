"""A Python producer of stamps, for crates/tame-ipc/examples/stamp_consumer.

    python stamp_producer.py --name NAME [--capacity 1024] [--count N] [--period-us 1000]

Opens the ring, prints READY once it holds the producer role, then every PERIOD
pushes a stamp (a full ring counts the attempt as refused, reported in the next
stamp) and prints ``sent N`` every 100 messages. Without --count it runs until killed
(the liveness test kills it with SIGKILL and expects the Rust consumer to see it dead).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamps import STAMP, CHECK, monotonic_ns  # noqa: E402

import tame_ipc  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True)
    parser.add_argument("--capacity", type=int, default=1024)
    parser.add_argument("--count", type=int, default=-1)
    parser.add_argument("--period-us", type=int, default=1000)
    args = parser.parse_args()

    ring = tame_ipc.Ring.open(args.name, STAMP.itemsize, args.capacity, elem_align=STAMP.alignment)
    tx = ring.producer()
    print("READY", flush=True)
    stamp = np.zeros(1, dtype=STAMP)
    seq = sent = full = 0
    period = args.period_us / 1e6
    start = time.monotonic()
    while args.count < 0 or seq < args.count:
        delay = start + seq * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        stamp[0] = (seq, monotonic_ns(), full, np.uint64(seq) ^ CHECK)
        if tx.push(stamp):
            sent += 1
            if sent % 100 == 0:
                print(f"sent {sent}", flush=True)
        else:
            full += 1
        seq += 1
    print(f"sent {sent} full {full}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
